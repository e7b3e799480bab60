"""How often the API may be called, and what a failed authentication costs the caller.

Checking a Basic-auth password costs about 0.3 s of CPU (PBKDF2), so wrong passwords are the cheapest way to
saturate the web servers. Every request that fails to authenticate (wrong credentials, or none on an endpoint
that needs them) is counted per client address; once an address is over the ``auth_failure`` rate, its
requests get 429 before any credential is checked. Each partner portal token is limited by the ``portal``
rate (a portal user holds one token), other authenticated users (staff) by the ``user`` rate; the ``anon``
rate limits anonymous requests to endpoints open to them (none today: every endpoint needs
credentials, so an anonymous request is refused, and counted as a failed authentication, before DRF's
throttles run).

Rates are ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, read per request (DRF's throttles copy them once, at
import), so a settings override takes effect at once. Each client's log of request times is a Redis list under
the product's key prefix (``cpsproject.common.redis_keys.throttle``), so each test, which has its own prefix,
starts clean.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from django.utils.translation import gettext
from django_redis import get_redis_connection
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException, AuthenticationFailed, NotAuthenticated, Throttled
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from cpsproject.common import redis_keys
from cpsproject.common.lua import LuaScript
from partners.permissions import portal_partner

if TYPE_CHECKING:  # rest_framework.views imports this module (through the API settings)
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)


class _RatesFromSettings:
    """Read the rate of ``scope`` when the throttle is made, not once at import as DRF does."""

    scope: str

    def get_rate(self) -> str | None:
        try:
            return api_settings.DEFAULT_THROTTLE_RATES[self.scope]
        except KeyError as exc:
            raise ImproperlyConfigured(f"No throttle rate set for the {self.scope!r} scope.") from exc


_SLIDING_LOG = LuaScript(__file__, "throttle_sliding_log.lua")


class _SlidingLogInRedis:
    """DRF's sliding log of request times (the same rates, 429s and Retry-After), kept in a Redis list.

    One script checks the log, drops the times that left the window and records this request: one round trip,
    where DRF's cache throttle reads and writes the whole log as a pickled list (up to ``portal``'s 600 times
    each way), and two requests at once can no longer both take the last place.
    """

    rate: str | None
    duration: float
    num_requests: int
    # DRF's throttle, which each class below also is, provides these.
    timer: Callable[[], float]
    get_cache_key: Callable[[Request, APIView | None], str | None]

    def _log(self, key: str, *, record: bool) -> bool:
        """Whether the log at ``key`` has room; with ``record``, take it for this request."""
        self.key, self.now = key, self.timer()
        allowed, self.count, oldest = _SLIDING_LOG(
            get_redis_connection("default"),
            keys=[key],
            args=[repr(self.now), self.duration, self.num_requests, int(record)],
        )
        self.oldest = float(oldest) if oldest else None
        return bool(allowed)

    def allow_request(self, request: Request, view: APIView) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        return key is None or self._log(key, record=True)

    def wait(self) -> float | None:
        remaining = self.duration if self.oldest is None else self.duration - (self.now - self.oldest)
        available = self.num_requests - self.count + 1
        return remaining / available if available > 0 else None


class AnonThrottle(_SlidingLogInRedis, _RatesFromSettings, AnonRateThrottle):
    """Requests without credentials, per client address (``anon`` rate)."""

    def get_cache_key(self, request: Request, view: APIView | None) -> str | None:
        if request.user and request.user.is_authenticated:
            return None
        return redis_keys.throttle(self.scope, self.get_ident(request))


class UserThrottle(_SlidingLogInRedis, _RatesFromSettings, UserRateThrottle):
    """Requests of one authenticated user but a portal, or of one address without credentials (``user`` rate)."""

    def get_cache_key(self, request: Request, view: APIView | None) -> str | None:
        authenticated = request.user and request.user.is_authenticated
        if authenticated and portal_partner(request.user):
            return None  # the portal throttle's
        return redis_keys.throttle(
            self.scope, str(request.user.pk) if authenticated else self.get_ident(request)
        )


class PortalThrottle(_SlidingLogInRedis, _RatesFromSettings, UserRateThrottle):
    """Requests made with one partner portal's token (``portal`` rate); staff are left to ``UserThrottle``.

    Keyed by the portal user, who holds exactly one token, rather than by the token itself: a secret has no
    place in a Redis key name.
    """

    scope = "portal"

    def get_cache_key(self, request: Request, view: APIView | None) -> str | None:
        user = request.user
        if not (user and user.is_authenticated and portal_partner(user)):
            return None
        return redis_keys.throttle(self.scope, str(user.pk))


class AuthFailureThrottle(_SlidingLogInRedis, _RatesFromSettings, SimpleRateThrottle):
    """Failed authentications per client address (``auth_failure`` rate): checked first, counted on failure."""

    scope = "auth_failure"

    def get_cache_key(self, request: Request, view: APIView | None) -> str:
        # The address alone: the user is not known yet when the check runs, and must not be looked up.
        return redis_keys.throttle(self.scope, self.get_ident(request))

    def allow_request(self, request: Request, view: APIView | None) -> bool:
        """Whether the address may still try to authenticate (does not count this request)."""
        return self.rate is None or self._log(self.get_cache_key(request, view), record=False)

    def record_failure(self, request: Request) -> None:
        if self.rate is None or not self._log(self.get_cache_key(request, None), record=True):
            return
        if self.count == self.num_requests:
            logger.warning("API authentication refused for %s: too many failures", self.get_ident(request))


class FailedAuthenticationGate(BaseAuthentication):
    """Listed first among the authentication classes: 429 for an address over its failure budget.

    It authenticates nobody (returns None), so the real authenticators run only while the address is under
    the budget: a client guessing passwords stops costing a password hash per request.
    """

    def authenticate(self, request: Request) -> None:
        throttle = AuthFailureThrottle()
        if not throttle.allow_request(request, None):
            raise Throttled(
                wait=throttle.wait(), detail=gettext("Too many failed authentications from this address.")
            )
        return None

    def authenticate_header(self, request: Request) -> str:
        # DRF asks the first authentication class for the challenge: with one, a request without (or with
        # wrong) credentials is a 401 that says how to authenticate, as HTTP wants, instead of a 403. Token,
        # not Basic: a Basic challenge makes a browser pop up a password dialog over the admin's session.
        return "Token"


# --- Error bodies ------------------------------------------------------------------------------------------


def _error_code(exc: Exception) -> str:
    if isinstance(exc, Http404):
        return "not_found"
    if isinstance(exc, DjangoPermissionDenied):
        return "permission_denied"
    return exc.default_code if isinstance(exc, APIException) else "error"


def _messages(value: object) -> list[str]:
    """Every message in a DRF error detail (a string, a list, or a dict of them), in order."""
    if isinstance(value, dict):
        return [m for v in value.values() for m in _messages(v)]
    if isinstance(value, list):
        return [m for v in value for m in _messages(v)]
    return [str(value)]


def error_body(exc: Exception, data: object) -> dict[str, Any]:
    """One shape for every error: ``{"error": code, "detail": sentence, <parameter>: [messages], …}``.

    ``error`` is DRF's code (``invalid``, ``parse_error``, ``not_authenticated``, ``permission_denied``,
    ``not_found``, ``not_acceptable``, ``throttled`` …) and ``detail`` one readable sentence, in the request's
    language (``LocaleMiddleware``: the language cookie, then ``Accept-Language``, then ``LANGUAGE_CODE``). An
    error about parameters or body fields also lists the messages under each one's name, as DRF does, so a
    client can tell which to fix.
    """
    fields = {}
    if isinstance(data, dict):
        fields = {name: _messages(value) for name, value in data.items() if name != "detail"}
        detail = str(data["detail"]) if "detail" in data else ""
    else:
        fields, detail = ({"non_field_errors": _messages(data)} if data else {}), ""
    if not detail:
        first_name, first = next(iter(fields.items()), ("", []))
        message = first[0] if first else gettext("The request was refused.")
        named = not first_name or first_name == "non_field_errors" or message.startswith(first_name)
        detail = message if named else f"{first_name}: {message}"
    return {"error": _error_code(exc), "detail": detail, **fields}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler with one error shape (``error_body``); failed authentications count against the address.

    Errors are JSON whatever format the request asked for: a CSV client still gets a readable error.
    """
    # Imported here: rest_framework.views imports this module (the authentication and throttle classes).
    from rest_framework.views import exception_handler as drf_exception_handler

    request = context["request"]
    if isinstance(exc, NotAuthenticated | AuthenticationFailed):
        AuthFailureThrottle().record_failure(request)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    response.data = error_body(exc, response.data)
    # The browsable API shows its errors on its page; every other format, and a request refused before its
    # format was settled (a bad ?format=, an Accept header nothing satisfies), gets JSON.
    renderer = getattr(request, "accepted_renderer", None)
    if renderer is None or (not isinstance(renderer, JSONRenderer) and renderer.format != "api"):
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
    return response
