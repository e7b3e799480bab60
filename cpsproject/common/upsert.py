"""Absolute-value upserts that work the same on MySQL and SQLite, NULL keys included."""

from collections.abc import Sequence

from django.db import models

CHUNK = 300


def upsert_rows(model: type[models.Model], rows: Sequence[dict], *, key_fields: Sequence[str]) -> None:
    """Write ``rows`` (field -> value dicts) so each key ends up with exactly these values.

    Rows may carry different fields: a field a row leaves out keeps its stored value (or its default).

    Runs inside the caller's transaction; the caller's lock keeps concurrent writers out. A unique
    constraint does not stop duplicate NULL keys in MySQL, so existing rows are matched here, not by the DB.
    """
    wanted = {tuple(row[f] for f in key_fields): row for row in rows}
    keys_in_order = list(wanted)
    for start in range(0, len(keys_in_order), CHUNK):
        _upsert_chunk(model, [wanted[k] for k in keys_in_order[start : start + CHUNK]], key_fields)


def _upsert_chunk(model: type[models.Model], rows: list[dict], key_fields: Sequence[str]) -> None:
    value_fields = sorted({f for row in rows for f in row} - set(key_fields))
    lookup = models.Q()
    for row in rows:
        lookup |= models.Q(**{f: row[f] for f in key_fields})
    existing = {tuple(getattr(obj, f) for f in key_fields): obj for obj in model.objects.filter(lookup)}
    to_update, to_create = [], []
    for row in rows:
        obj = existing.get(tuple(row[f] for f in key_fields))
        if obj is None:
            to_create.append(model(**row))
            continue
        for f, value in row.items():
            setattr(obj, f, value)
        to_update.append(obj)
    if to_update:
        model.objects.bulk_update(to_update, value_fields, batch_size=500)
    if to_create:
        model.objects.bulk_create(to_create, batch_size=500)
