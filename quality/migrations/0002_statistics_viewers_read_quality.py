"""The "statistics viewers" (``cpsproject.common.viewers``), who read traffic, read its quality too: the days,
the findings and the listed networks. Resolving a finding (change) stays with whoever staff give it to."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from cpsproject.common.viewers import GROUP_NAME, ensure_statistics_viewers

from quality.migrations import PERMISSIONS


def add_permissions(apps, schema_editor) -> None:
    # Permissions are created after all migrations (post_migrate): on a new database they do not exist yet.
    app_config = apps.get_app_config("quality")
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, apps=apps, verbosity=0)
    finally:
        app_config.models_module = models_module
    ensure_statistics_viewers(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        group_name=GROUP_NAME,
        permissions=PERMISSIONS,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("quality", "0001_initial"),
        ("stats", "0008_statistics_viewers_group"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(add_permissions, migrations.RunPython.noop)]
