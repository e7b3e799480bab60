"""Ship the "statistics viewers" group (``cpsproject.common.viewers``): granting a staff user the statistics is
one click. Statistics pages and API reads now ask for the view permissions this group holds."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

from cpsproject.common.viewers import ensure_statistics_viewers


def create_group(apps, schema_editor) -> None:
    # Permissions are created after all migrations (post_migrate): on a new database they do not exist yet.
    # create_permissions skips an app without models_module, which a migration's app registry never sets.
    for app_config in apps.get_app_configs():
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        try:
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = models_module
    ensure_statistics_viewers(
        group_model=apps.get_model("auth", "Group"), permission_model=apps.get_model("auth", "Permission")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0007_archive_in_chunks"),
        ("loginlog", "0002_translatable_labels"),
        ("partners", "0003_translatable_labels"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
