def queue_logins(pipe, logins) -> None:
    pass
