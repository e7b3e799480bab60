"""What a valid login is; shared by the consumer (dead letters), the API (400) and in-process callers."""

from django.conf import settings

MAX_USER_ID = 2**32 - 1


class LoginRejected(ValueError):
    """``field`` is the offending field; ``missing`` tells a missing value from a bad one."""

    def __init__(self, field: str, message: str, *, missing: bool = False):
        super().__init__(message)
        self.field = field
        self.missing = missing


def user_types() -> list[str]:
    return list(settings.CPS_LOGINS["USER_TYPES"])


def validate_login(*, user_type: object, user_id: object) -> tuple[str, int]:
    """Return ``(user_type, user_id)`` normalised, or raise ``LoginRejected`` saying what is wrong."""
    if user_type in (None, ""):
        raise LoginRejected("user_type", "user_type is missing", missing=True)
    if user_type not in user_types():
        raise LoginRejected(
            "user_type", f"user_type {str(user_type)[:32]!r} is not one of {', '.join(user_types())}"
        )
    if isinstance(user_id, str) and user_id.isdigit():
        user_id = int(user_id)
    if not isinstance(user_id, int) or isinstance(user_id, bool) or not 0 <= user_id <= MAX_USER_ID:
        raise LoginRejected(
            "user_id", f"user_id must be an integer from 0 to {MAX_USER_ID}, not {str(user_id)[:32]!r}"
        )
    return user_type, user_id
