"""Who may do what through the API.

Reads: staff see every partner; a portal user sees its own partner's subtree only. Writes: staff holding the
model permission the admin asks for. Permission classes run before the body is parsed, so a caller refused a
write learns nothing from validation errors (which codes exist, which parents are missing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from django.contrib.auth import get_permission_codename
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AbstractUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Model, QuerySet
from django.utils.translation import gettext, gettext_lazy
from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from cpsproject.common.columns import column
from cpsproject.common.labels import Label
from cpsproject.common.viewers import GROUP_NAME
from partners.models import CODE_VALIDATOR, Partner, PortalAccount
from partners.selectors import partner_subtree

if TYPE_CHECKING:  # rest_framework.views imports this module (through the API settings)
    from rest_framework.views import APIView

# A longer path segment cannot name a partner: answer 404 without asking the database.
_MAX_CODE = Partner._meta.get_field("code").max_length or 0  # a CharField always has one

# Who asks: a signed-in user (staff, or a partner portal) or nobody.
Caller: TypeAlias = AbstractUser | AnonymousUser


# Where a user object keeps its portal partner once looked up: the permission, the throttles and the view all
# ask within one request. Nothing outlives the request, so a revoked or moved portal takes effect at once.
_SCOPE = "_portal_scope"


def portal_partner(user: Caller) -> Partner | None:
    """Return the partner a portal user is scoped to, or None for staff and other users."""
    if not user.is_authenticated:
        return None
    if not hasattr(user, _SCOPE):
        setattr(user, _SCOPE, _portal_scope(user.pk))
    return getattr(user, _SCOPE)


SCOPE_FIELDS = ["id", "code", "name", "parent_id", "level", "path", "is_active"]


def remember_portal_scope(user: AbstractBaseUser, partner: Partner | None) -> None:
    """Keep ``partner`` as ``user``'s portal scope for this request (the token authentication read it)."""
    setattr(user, _SCOPE, partner)


def partner_from_row(row: Sequence[Any]) -> Partner:
    """The partner of a row of ``SCOPE_FIELDS`` columns, its other fields left to load on access."""
    *values, is_active = row
    return Partner.from_db(connection.alias, SCOPE_FIELDS, [*values, bool(is_active)])


def _portal_scope(user_id: int) -> Partner | None:
    """The partner of ``user_id``'s portal account, in one query, its timestamps left to load on access.

    Raw SQL: every API request of a portal asks, and building the ORM's join costs ~1 ms of CPU, several
    times what the database spends on it.
    """
    quote = connection.ops.quote_name
    columns = ", ".join(f"p.{quote(column(Partner, name))}" for name in SCOPE_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {quote(Partner._meta.db_table)} p"
            f" JOIN {quote(PortalAccount._meta.db_table)} a ON a.partner_id = p.id WHERE a.user_id = %s",
            [user_id],
        )
        row = cursor.fetchone()
    return None if row is None else partner_from_row(row)


class IsStaffOrPortal(BasePermission):
    """A partner portal token, or staff holding ``staff_perms`` (the view permissions of what the view reads)."""

    message: Label = gettext_lazy("Staff credentials or a partner portal token are required.")
    staff_perms: tuple[str, ...] = ()
    # The group shipped with ``staff_perms`` (``cpsproject.common.viewers``), named in the refusal.
    staff_group = GROUP_NAME

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if user.is_staff:
            if not user.has_perms(self.staff_perms):
                self.message = gettext(
                    "Staff need the permissions %(perms)s (the “%(group)s” group holds them)."
                ) % {
                    "perms": ", ".join(self.staff_perms),
                    "group": gettext(self.staff_group),
                }
                return False
            return True
        return portal_partner(user) is not None


class PartnerReaders(IsStaffOrPortal):
    staff_perms = ("partners.view_partner",)


class StaffOnly(IsStaffOrPortal):
    """Staff holding ``staff_perms``; portal tokens are refused."""

    message = gettext_lazy("Staff credentials are required.")

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if user and user.is_authenticated and not user.is_staff:
            return False
        return super().has_permission(request, view)


class ModelPermissionForWrites(BasePermission):
    """Let reads through; a write needs a staff user with the model's add/change/delete permission.

    The same permissions Django's admin checks (``DjangoModelPermissions`` without its queryset lookup, which
    here would run the view's filters, and their 400s, before the permission check).
    """

    model: type[Model]
    actions = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}
    message = gettext_lazy("You do not have permission to change this data.")

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS:
            return True
        user = request.user
        action = self.actions.get(request.method)
        if action is None or not (user and user.is_authenticated and user.is_staff):
            return False
        opts = self.model._meta
        return user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


class PartnerWrites(ModelPermissionForWrites):
    model = Partner
    message = gettext_lazy(
        "Writing partners needs a staff user with the partners permission (partners.add_partner to create)."
    )


def visible_partners(user: Caller) -> QuerySet[Partner]:
    """Return the partners ``user`` may see: all for staff, the portal partner's subtree otherwise."""
    if user.is_staff:
        return Partner.objects.all()
    scope = portal_partner(user)
    return partner_subtree(partner=scope) if scope else Partner.objects.none()


def could_be_code(code: object) -> bool:
    """Whether ``code`` has the form of a partner code; anything else names no partner."""
    if not isinstance(code, str) or not 0 < len(code) <= _MAX_CODE:
        return False
    try:
        CODE_VALIDATOR(code)
    except ValidationError:
        return False
    return True


def get_visible_partner(user: Caller, code: str) -> Partner:
    """Return the partner with ``code`` if ``user`` may see it; 404 otherwise (never reveal it exists)."""
    # One answer for a code outside the caller's subtree and for one that does not exist, byte for byte.
    scope = None if user.is_staff else portal_partner(user)
    if scope is not None and scope.code == code:
        return scope  # a portal's own partner, as the permission check just read it
    partner = (
        visible_partners(user).select_related("parent").filter(code=code).first()
        if could_be_code(code)
        else None
    )
    if partner is None:
        raise NotFound(gettext("No such partner."))
    return partner
