"""Ship the "conversions viewers" group (``cpsproject.common.viewers``): orders, ledger and statements for the
staff who pay partners, apart from the statistics viewers who read traffic."""

from django.db import migrations

from cpsproject.common.viewers import (
    CONVERSIONS_GROUP_NAME,
    CONVERSIONS_PERMISSIONS,
    grant_in_migration,
)


def create_group(apps, schema_editor) -> None:
    grant_in_migration(
        apps,
        app_labels=("conversions", "partners"),
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
