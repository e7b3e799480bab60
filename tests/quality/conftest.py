import pytest


@pytest.fixture(autouse=True)
def statistics_viewers_read_quality(db) -> None:
    """The statistics viewers hold the quality view permissions (a migration gives them): put them back after a
    transactional test elsewhere emptied the tables, before ``create_staff`` finds the group."""
    from django.contrib.auth.models import Group, Permission

    from cpsproject.common.viewers import ensure_statistics_viewers
    from quality.migrations import PERMISSIONS

    ensure_statistics_viewers(group_model=Group, permission_model=Permission, permissions=PERMISSIONS)
