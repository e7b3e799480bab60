"""The "statistics viewers" group: the view permissions that open every statistics page and API read to staff.

Staff hold no permission by default, so a new staff account sees no statistics until it is put in this group
(one click in the admin's user page). The group is created by a data migration (``stats`` 0008), in the
language of the installation (``LANGUAGE_CODE``), and found again under its name in any of ``LANGUAGES``.
Dead letters stay outside it: their payloads may hold users' data (``stats.view_deadletter`` on its own).
"""

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission
from django.utils import translation
from django.utils.translation import gettext, gettext_noop

GROUP_NAME = gettext_noop("statistics viewers")

# (app label, codename): the dashboard, the partner page and the stats API need stats.view_dailystat; the
# partner box and partner API reads need partners.view_partner; the login pages and API loginlog.view_loginmonth.
PERMISSIONS = [
    ("stats", "view_dailystat"),
    ("stats", "view_bucketstat"),
    ("stats", "view_reconciledrift"),
    ("loginlog", "view_loginmonth"),
    ("partners", "view_partner"),
]

# Money is a second group: who reads traffic need not read what partners are paid (finance does both). Held
# refunds stay outside, as dead letters do: they keep the raw event with the buyer's openid.
CONVERSIONS_GROUP_NAME = gettext_noop("conversions viewers")
CONVERSIONS_PERMISSIONS = [
    ("conversions", "view_order"),
    ("conversions", "view_orderevent"),
    ("conversions", "view_ledgerentry"),
    ("conversions", "view_statement"),
    ("conversions", "view_exchangerate"),
    ("conversions", "view_monthclose"),
    ("partners", "view_partner"),
]


def group_names(group_name: str = GROUP_NAME) -> list[str]:
    """Return the group's name in the installation's language first, then in every other language."""
    names = []
    for code in [settings.LANGUAGE_CODE, *(code for code, _label in settings.LANGUAGES)]:
        with translation.override(code):
            name = gettext(group_name)
        if name not in names:
            names.append(name)
    return names


def ensure_statistics_viewers(
    *,
    group_model: type[Group],
    permission_model: type[Permission],
    group_name: str = GROUP_NAME,
    permissions: Sequence[tuple[str, str]] = PERMISSIONS,
) -> Group:
    """Return the group (created if missing) holding exactly ``permissions`` among others it may have been given.

    Takes the models as arguments so that a migration passes its historical ones; the conversions viewers are
    made by the same function with their own name and permissions.
    """
    names = group_names(group_name)
    group = group_model.objects.filter(name__in=names).order_by("id").first()
    if group is None:
        group = group_model.objects.create(name=names[0])
    for app_label, codename in permissions:
        group.permissions.add(
            permission_model.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return group


def grant_in_migration(
    apps: Any,
    *,
    app_labels: Sequence[str] | None,
    group_name: str = GROUP_NAME,
    permissions: Sequence[tuple[str, str]] = PERMISSIONS,
) -> None:
    """For a data migration: give the group ``permissions`` of ``app_labels``' models (every app's when None).

    Permissions are created after all migrations (post_migrate), so on a new database they do not exist yet:
    they are created here first. ``create_permissions`` skips an app without ``models_module``, which a
    migration's app registry never sets, so it is set for the call.
    """
    configs = apps.get_app_configs() if app_labels is None else map(apps.get_app_config, app_labels)
    for app_config in configs:
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = models_module
    ensure_statistics_viewers(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        group_name=group_name,
        permissions=permissions,
    )
