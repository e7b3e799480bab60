from cpsproject.common.locks import run_as_task
from loginlog.services import sync_logins


@run_as_task
def sync_logins_task() -> str:
    return sync_logins().summary()
