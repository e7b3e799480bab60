"""Settings access for the apps: a dict setting per app, defaults in the app, and a clear error on a bad value.

As DRF's ``api_settings``: the project's settings hold only what it changes (``CPS_STATS = {...}``), the app
holds every default, and values are read at call time so tests can override them.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

# Resolved values per (setting, option). The consumer reads options per event; settings change only through
# override_settings (tests) or a restart, and setting_changed clears the cache then.
_resolved: dict[tuple[str, str], Any] = {}


def _forget(*, setting: str, **kwargs: object) -> None:
    for cached in [k for k in _resolved if k[0] == setting]:
        del _resolved[cached]


setting_changed.connect(_forget)


@dataclass(frozen=True)
class Check:
    """A rule a value must pass, and how to say it in the error."""

    test: Callable[[Any], bool]
    expected: str


def positive_int() -> Check:
    return Check(lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer")


@dataclass(frozen=True)
class AppSettings:
    """Options of one app, read from ``settings.<setting>`` over ``defaults``."""

    setting: str
    defaults: Mapping[str, Any]
    checks: Mapping[str, Check] = field(default_factory=dict)

    def __call__(self, name: str) -> Any:
        try:
            return _resolved[(self.setting, name)]
        except KeyError:
            pass
        if name not in self.defaults:
            raise ImproperlyConfigured(f"{self.setting}[{name!r}] is not an option of this app")
        value = getattr(settings, self.setting, {}).get(name, self.defaults[name])
        check = self.checks.get(name)
        if check and not check.test(value):
            raise ImproperlyConfigured(f"{self.setting}[{name!r}] must be {check.expected}, not {value!r}")
        _resolved[(self.setting, name)] = value
        return value
