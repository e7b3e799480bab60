"""What ``scripts/demo`` loads into an empty installation."""

import logging
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from partners.models import Partner
from partners.services import partners_import_csv

logger = logging.getLogger(__name__)

SAMPLE_PARTNERS = Path(settings.BASE_DIR) / "sample" / "partners.csv"
DEMO_USER = ("demo", "demo")


def seed_demo() -> str:
    """Load the sample tree and the demo superuser when missing; return a one-line summary."""
    loaded = 0
    if not Partner.objects.exists():
        loaded = len(partners_import_csv(text=SAMPLE_PARTNERS.read_text(encoding="utf-8")))
    user_model = get_user_model()
    if not user_model.objects.filter(username=DEMO_USER[0]).exists():
        user_model.objects.create_superuser(DEMO_USER[0], "demo@example.com", DEMO_USER[1])
    return (
        f"partners: {Partner.objects.count()} ({loaded} loaded now); superuser: {DEMO_USER[0]}/{DEMO_USER[1]}"
    )
