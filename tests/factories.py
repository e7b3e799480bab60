"""Plain builders for test data."""

from django.contrib.auth import get_user_model

from partners.models import Partner
from partners.services import partner_create


def create_partner(code: str, *, parent: Partner | None = None, name: str | None = None) -> Partner:
    return partner_create(code=code, name=name or f"Partner {code}", parent=parent)


def create_tree() -> dict[str, Partner]:
    """Build A ─ A1 ─ A1a, A ─ A2, and B: three levels under A, one lone root."""
    a = create_partner("A")
    a1 = create_partner("A1", parent=a)
    return {
        "A": a,
        "A1": a1,
        "A1a": create_partner("A1a", parent=a1),
        "A2": create_partner("A2", parent=a),
        "B": create_partner("B"),
    }


def create_staff(username: str = "staff", password: str = "pw"):
    return get_user_model().objects.create_user(username=username, password=password, is_staff=True)
