"""What a valid login is; shared by the consumer (dead letters), the API (400) and in-process callers."""

from loginlog.conf import login_setting

# A user id is a bit offset in a day bitmap: ids are decimal digits, and few of them.
_MAX_ID_DIGITS = 19


class LoginRejected(ValueError):
    """``field`` is the offending field; ``missing`` tells a missing value from a bad one."""

    def __init__(self, field: str, message: str, *, missing: bool = False):
        super().__init__(message)
        self.field = field
        self.missing = missing


def user_types() -> list[str]:
    return list(login_setting("USER_TYPES"))


def max_user_id() -> int:
    """The largest user id a bitmap may hold; a day bitmap of one type costs up to ``max_user_id / 8`` bytes."""
    return int(login_setting("MAX_USER_ID"))


def _shown(value: object) -> str:
    """A short printable rendering (``str(int)`` of a huge integer raises, and a string may hold anything)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if abs(value) < 10**30 else "a larger integer"
    text = value if isinstance(value, str) else type(value).__name__
    return repr(text[:32].encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace"))


def validate_login(*, user_type: object, user_id: object) -> tuple[str, int]:
    """Return ``(user_type, user_id)`` normalised, or raise ``LoginRejected`` saying what is wrong.

    ``user_id`` is a JSON integer or a string of ASCII digits (``"²"`` is a digit to ``str.isdigit``, not to
    ``int``), from 0 to ``max_user_id()``.
    """
    if user_type in (None, ""):
        raise LoginRejected("user_type", "user_type is missing", missing=True)
    if not isinstance(user_type, str) or user_type not in user_types():
        raise LoginRejected(
            "user_type", f"user_type {_shown(user_type)} is not one of {', '.join(user_types())}"
        )
    if user_id is None or user_id == "":
        raise LoginRejected("user_id", "user_id is missing", missing=True)
    if (
        isinstance(user_id, str)
        and user_id.isascii()
        and user_id.isdigit()
        and len(user_id) <= _MAX_ID_DIGITS
    ):
        user_id = int(user_id)
    if not isinstance(user_id, int) or isinstance(user_id, bool) or not 0 <= user_id <= max_user_id():
        raise LoginRejected(
            "user_id", f"user_id must be an integer from 0 to {max_user_id()}, not {_shown(user_id)}"
        )
    return user_type, user_id
