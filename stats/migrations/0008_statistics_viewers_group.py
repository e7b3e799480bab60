"""Ship the "statistics viewers" group (``cpsproject.common.viewers``): granting a staff user the statistics is
one click. Statistics pages and API reads now ask for the view permissions this group holds."""

from django.db import migrations

from cpsproject.common.viewers import grant_in_migration


def create_group(apps, schema_editor) -> None:
    grant_in_migration(apps, app_labels=None)


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0007_archive_in_chunks"),
        ("loginlog", "0002_translatable_labels"),
        ("partners", "0003_translatable_labels"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
