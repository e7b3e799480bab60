"""Absolute-value upserts that work the same on MySQL and SQLite, NULL keys included.

Rows whose key has no NULL go out as one multi-row ``INSERT … ON DUPLICATE KEY UPDATE`` (MySQL, MariaDB) or
``INSERT … ON CONFLICT (key) DO UPDATE`` (SQLite, PostgreSQL) per chunk, built once per chunk from Django's own
backend operations: no model instances, no ORM query building per row. A unique constraint does not stop
duplicate NULL keys (MySQL, SQLite and PostgreSQL alike), so rows with a NULL in their key (the site-wide rows,
a handful per flush) are matched here with an UPDATE and inserted only when it found nothing.
"""

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection, models
from django.db.models.constants import OnConflict
from django.utils import timezone

# Rows per statement, at most; SQLite may lower it to stay under its limit of query parameters.
CHUNK = 1000

# Field types whose Python values go to the driver unchanged, skipping a per-value call on the hot path.
_PLAIN_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "CharField",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "SmallIntegerField",
        "TextField",
    }
)
# Field types whose values repeat across the rows of one call (bucket starts, days), converted once per value.
_REPEATED_TYPES = frozenset({"DateField", "DateTimeField"})


def upsert_rows(model: type[models.Model], rows: Sequence[dict], *, key_fields: Sequence[str]) -> None:
    """Write ``rows`` (field -> value dicts) so each key ends up with exactly these values.

    Rows may carry different fields: a field a row leaves out keeps its stored value (or its default).
    ``auto_now`` fields are set to now on every row written.

    Runs inside the caller's transaction; the caller's lock keeps concurrent writers out (the NULL-key rows are
    matched by a read, then written).
    """
    wanted = {tuple(row[f] for f in key_fields): row for row in rows}
    by_fields: dict[tuple[str, ...], list[dict]] = {}
    null_keyed: list[dict] = []
    for key, row in wanted.items():
        if None in key:
            null_keyed.append(row)
        else:
            by_fields.setdefault(tuple(sorted(row)), []).append(row)
    now = timezone.now()
    for names, group in by_fields.items():
        _insert_on_conflict(model, group, names=names, key_fields=key_fields, now=now)
    for row in null_keyed:
        _upsert_null_keyed(model, row, key_fields=key_fields, now=now)


def _concrete_fields(model: type[models.Model]) -> list[models.Field]:
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def _auto_now(field: models.Field) -> bool:
    return bool(getattr(field, "auto_now", False))


def _db_value(field: models.Field) -> Callable[[Any], Any]:
    internal = field.target_field.get_internal_type() if field.is_relation else field.get_internal_type()
    if internal in _PLAIN_TYPES:
        return lambda value: value
    if internal in _REPEATED_TYPES:
        # A flush writes 1,000 partners' rows of each bucket start: convert each distinct value once.
        converted: dict[Any, Any] = {}

        def convert(value: Any) -> Any:
            if value not in converted:
                converted[value] = field.get_db_prep_save(value, connection)
            return converted[value]

        return convert
    return lambda value: field.get_db_prep_save(value, connection)


def _insert_on_conflict(
    model: type[models.Model],
    rows: list[dict],
    *,
    names: Sequence[str],
    key_fields: Sequence[str],
    now,
) -> None:
    fields = _concrete_fields(model)
    given = set(names)
    # A column the rows leave out is inserted with its default and left alone on update.
    updated = [f for f in fields if (f.attname in given and f.attname not in key_fields) or _auto_now(f)]
    # Per column: the row field to read and how to convert it, or the one value every row gets.
    columns_from: list[tuple[str | None, Callable[[Any], Any] | None, Any]] = []
    for f in fields:
        prep = _db_value(f)
        if _auto_now(f):
            columns_from.append((None, None, prep(now)))
        elif f.attname in given:
            columns_from.append((f.attname, prep, None))
        else:
            columns_from.append((None, None, prep(f.get_default())))
    ops, quote = connection.ops, connection.ops.quote_name
    key_columns = [model._meta.get_field(name).column for name in key_fields]
    suffix = ops.on_conflict_suffix_sql(
        fields, OnConflict.UPDATE, [f.column for f in updated] or key_columns[:1], key_columns
    )
    columns = ", ".join(quote(f.column) for f in fields)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    size = max(1, min(CHUNK, ops.bulk_batch_size(fields, rows)))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            params: list[Any] = []
            for row in chunk:
                params.extend(prep(row[name]) if name else fixed for name, prep, fixed in columns_from)
            values = ", ".join([row_sql] * len(chunk))
            cursor.execute(
                f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {values} {suffix}", params
            )


def _upsert_null_keyed(model: type[models.Model], row: dict, *, key_fields: Sequence[str], now) -> None:
    lookup = {name: row[name] for name in key_fields}
    values = {name: value for name, value in row.items() if name not in key_fields}
    values.update({f.attname: now for f in _concrete_fields(model) if _auto_now(f)})
    if not model.objects.filter(**lookup).update(**values):
        model.objects.create(**row)
