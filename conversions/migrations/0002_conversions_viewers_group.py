"""Ship the "conversions viewers" group (``cpsproject.common.viewers``): orders, ledger and statements for the
staff who pay partners, apart from the statistics viewers who read traffic."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from cpsproject.common.viewers import (
    CONVERSIONS_GROUP_NAME,
    CONVERSIONS_PERMISSIONS,
    ensure_statistics_viewers,
)


def create_group(apps, schema_editor) -> None:
    # Permissions are created after all migrations (post_migrate): on a new database they do not exist yet.
    for label in ("conversions", "partners"):
        app_config = apps.get_app_config(label)
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = models_module
    ensure_statistics_viewers(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        group_name=CONVERSIONS_GROUP_NAME,
        permissions=CONVERSIONS_PERMISSIONS,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversions", "0001_initial"),
        ("partners", "0004_partner_commission_bp"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
