def queue_rankings(pipe, views, *, now) -> None:
    pass
