"""Who may read what: staff see every partner; a portal user sees its own partner's subtree only."""

from django.db.models import QuerySet
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission

from partners.models import Partner
from partners.selectors import partner_subtree


def portal_partner(user) -> Partner | None:
    """Return the partner a portal user is scoped to, or None for staff and other users."""
    account = getattr(user, "portal_account", None) if user.is_authenticated else None
    return account.partner if account else None


class IsStaffOrPortal(BasePermission):
    message = "Staff credentials or a partner portal token are required."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and (user.is_staff or portal_partner(user)))


def visible_partners(user) -> QuerySet[Partner]:
    """Return the partners ``user`` may see: all for staff, the portal partner's subtree otherwise."""
    if user.is_staff:
        return Partner.objects.all()
    scope = portal_partner(user)
    return partner_subtree(partner=scope) if scope else Partner.objects.none()


def get_visible_partner(user, code: str) -> Partner:
    """Return the partner with ``code`` if ``user`` may see it; 404 otherwise (never reveal it exists)."""
    partner = visible_partners(user).select_related("parent").filter(code=code).first()
    if partner is None:
        raise NotFound(f"No partner {code!r}.")
    return partner
