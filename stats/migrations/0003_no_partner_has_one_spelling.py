"""Archived traffic with no partner is spelled ``~site`` (stats.keys.NO_PARTNER), as everywhere else."""

from django.db import migrations

NO_PARTNER = "~site"  # frozen here: a migration must not change when the code does


def forwards(apps, schema_editor):
    apps.get_model("stats", "RawEvent").objects.filter(partner="").update(partner=NO_PARTNER)


def backwards(apps, schema_editor):
    apps.get_model("stats", "RawEvent").objects.filter(partner=NO_PARTNER).update(partner="")


class Migration(migrations.Migration):
    dependencies = [("stats", "0002_payload_as_text_and_more_dead_letter_reasons")]
    operations = [migrations.RunPython(forwards, backwards)]
