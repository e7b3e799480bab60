"""The "statistics viewers" (``cpsproject.common.viewers``), who read traffic, read its quality too: the days,
the findings and the listed networks. Resolving a finding (change) stays with whoever staff give it to."""

from django.db import migrations

from cpsproject.common.viewers import grant_in_migration

from quality.migrations import PERMISSIONS


def add_permissions(apps, schema_editor) -> None:
    grant_in_migration(apps, app_labels=("quality",), permissions=PERMISSIONS)


class Migration(migrations.Migration):
    dependencies = [
        ("quality", "0001_initial"),
        ("stats", "0008_statistics_viewers_group"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(add_permissions, migrations.RunPython.noop)]
