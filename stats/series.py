def queue_series(pipe, views) -> None:
    pass
