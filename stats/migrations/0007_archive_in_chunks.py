"""Keep the SQL archive's raw events in chunks, a row per few thousand events instead of a row per event.

The rows already archived are copied into chunks in the order they were stored, then their table goes.
"""

import datetime as dt
import zlib

import orjson
from django.db import migrations, models

CHUNK_EVENTS = 5000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def rows_to_chunks(apps, schema_editor) -> None:
    raw_event = apps.get_model("stats", "RawEvent")
    chunk = apps.get_model("stats", "RawEventChunk")
    rows = raw_event.objects.order_by("id").values_list(
        "id",
        "event_id",
        "type",
        "ts",
        "day",
        "partner",
        "partner_l1",
        "partner_l2",
        "partner_l3",
        "openid",
        "is_bot",
        "payload",
    )
    last = 0
    while batch := list(rows.filter(id__gt=last)[:CHUNK_EVENTS]):
        last = batch[-1][0]
        document = {
            "event_id": [row[1] for row in batch],
            "type": [row[2] for row in batch],
            "ts": [(_aware(row[3]) - EPOCH) // dt.timedelta(microseconds=1) for row in batch],
            "partner": [row[5] for row in batch],
            "openid": [row[9] for row in batch],
            "payload": [row[11] for row in batch],
            "bots": [n for n, row in enumerate(batch) if row[10]],
            "paths": {row[5]: [code for code in row[6:9] if code] for row in batch if row[6]},
        }
        chunk.objects.create(
            first_day=min(row[4] for row in batch),
            last_day=max(row[4] for row in batch),
            events=len(batch),
            body=zlib.compress(orjson.dumps(document), 1),
        )


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0006_archive_ids_compared_byte_for_byte"),
    ]

    operations = [
        migrations.CreateModel(
            name="DiscardedEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("event_id", models.CharField(max_length=128, verbose_name="event id")),
                ("discarded_at", models.DateTimeField(auto_now_add=True, verbose_name="discarded at")),
            ],
            options={
                "verbose_name": "discarded event",
                "verbose_name_plural": "discarded events",
            },
        ),
        migrations.CreateModel(
            name="RawEventChunk",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("first_day", models.DateField(verbose_name="first day")),
                ("last_day", models.DateField(verbose_name="last day")),
                ("events", models.PositiveIntegerField(verbose_name="events")),
                ("body", models.BinaryField(verbose_name="body")),
            ],
            options={
                "verbose_name": "raw event chunk",
                "verbose_name_plural": "raw event chunks",
            },
        ),
        migrations.RunPython(rows_to_chunks, migrations.RunPython.noop, elidable=True),
        migrations.DeleteModel(
            name="RawEvent",
        ),
        migrations.AddIndex(
            model_name="raweventchunk",
            index=models.Index(fields=["last_day", "first_day"], name="stats_rawev_last_da_b89d19_idx"),
        ),
    ]
