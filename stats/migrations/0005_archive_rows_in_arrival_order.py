"""Cluster the SQL archive's rows by an increasing key instead of by the client's event id.

The event id stops being the primary key first (it stays unique), then the new key is added: MySQL numbers the
rows already stored. The lone index on ``day`` goes: the ``(day, type)`` index serves every query by day.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0004_translatable_labels"),
    ]

    operations = [
        migrations.AlterField(
            model_name="rawevent",
            name="event_id",
            field=models.CharField(max_length=128, unique=True, verbose_name="event id"),
        ),
        migrations.AddField(
            model_name="rawevent",
            name="id",
            field=models.BigAutoField(primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name="rawevent",
            name="day",
            field=models.DateField(verbose_name="day"),
        ),
    ]
