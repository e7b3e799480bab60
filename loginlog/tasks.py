from loginlog.services import sync_logins


def sync_logins_task() -> str:
    return sync_logins().summary()
