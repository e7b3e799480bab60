"""Absolute-value upserts that work the same on MySQL and SQLite, NULL keys included.

Rows whose key has no NULL go out as one multi-row ``INSERT … ON DUPLICATE KEY UPDATE`` (MySQL, MariaDB) or
``INSERT … ON CONFLICT (key) DO UPDATE`` (SQLite, PostgreSQL) per chunk, built once per chunk from Django's own
backend operations: no model instances, no ORM query building per row. On MySQL the statement is built here
with the driver's C escaping, each distinct value escaped once: mysqlclient would quote every parameter through
Python calls, which cost about as much as MariaDB spends inserting the rows. ``upsert_chunks`` writes a stream
of chunks, sending each chunk's statement before it asks for the next chunk, so that on MySQL whatever produces
the rows (a flush reading Redis) runs while the database inserts. A unique constraint does not stop
duplicate NULL keys (MySQL, SQLite and PostgreSQL alike), so rows with a NULL in their key (the site-wide rows,
a handful per flush) are matched here with an UPDATE and inserted only when it found nothing.
"""

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from types import TracebackType
from typing import Any

from django.db import connection, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.constants import OnConflict
from django.utils import timezone

from cpsproject.common.columns import column, field_column

# Rows per statement, at most; SQLite may lower it to stay under its limit of query parameters.
CHUNK = 1000
# A MySQL statement stops growing past this size (day rows carry HyperLogLogs of up to 12 KB): far below
# max_allowed_packet (16 MB by default on MariaDB, 64 MB on MySQL).
MAX_STATEMENT_BYTES = 1_000_000

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
    by_fields, null_keyed = _grouped(rows, key_fields)
    now = timezone.now()
    for names, group in by_fields.items():
        _insert_on_conflict(model, group, names=names, key_fields=key_fields, now=now)
    for row in null_keyed.values():
        _upsert_null_keyed(model, row, key_fields=key_fields, now=now)


def upsert_chunks(
    model: type[models.Model], chunks: Iterable[Sequence[dict]], *, key_fields: Sequence[str]
) -> None:
    """Write every chunk of rows as ``upsert_rows`` would; a key in a later chunk ends with the later values.

    On MySQL a chunk's statements are sent before the next chunk is asked for, and their result is read only
    when the next statement is ready: the code producing the chunks runs while MariaDB inserts. So that code
    must not use the database connection (a statement is in flight on it), and the rows with a NULL in their
    key are written after the last chunk.
    """
    if connection.vendor != "mysql":
        for rows in chunks:
            upsert_rows(model, rows, key_fields=key_fields)
        return
    now = timezone.now()
    null_keyed: dict[tuple, dict] = {}
    with _StatementInFlight(connection) as in_flight:
        for rows in chunks:
            by_fields, null_rows = _grouped(rows, key_fields)
            null_keyed.update(null_rows)
            for names, group in by_fields.items():
                for statement in _mysql_statements(model, group, names=names, key_fields=key_fields, now=now):
                    in_flight.send(statement)
    for row in null_keyed.values():
        _upsert_null_keyed(model, row, key_fields=key_fields, now=now)


def _grouped(
    rows: Sequence[dict], key_fields: Sequence[str]
) -> tuple[dict[tuple, list[dict]], dict[tuple, dict]]:
    """Return the rows with a full key grouped by the fields they carry, and those with a NULL in their key.

    A key given twice keeps its last row: one statement may not write a row twice.
    """
    key_of = itemgetter(*key_fields) if len(key_fields) > 1 else lambda row: (row[key_fields[0]],)
    wanted = dict(zip(map(key_of, rows), rows, strict=True))
    by_fields: dict[tuple, list[dict]] = {}
    null_keyed: dict[tuple, dict] = {}
    for key, row in wanted.items():
        if None in key:
            null_keyed[key] = row
        else:
            # Rows built alike list their fields alike: one group, without sorting 100,000 field lists.
            by_fields.setdefault(tuple(row), []).append(row)
    return by_fields, null_keyed


class _StatementInFlight:
    """Send statements on the MySQLdb connection one ahead: each one's result is read before the next is sent.

    Leaving the block reads the last result; leaving it by an exception still reads it (errors ignored: the
    exception in hand is what the caller must see), so the rollback that follows finds the connection in step.
    """

    def __init__(self, wrapper: BaseDatabaseWrapper) -> None:
        self.wrapper = wrapper
        self.pending = False

    def __enter__(self) -> "_StatementInFlight":
        self.wrapper.ensure_connection()
        self.db = self.wrapper.connection
        return self

    def send(self, statement: bytes) -> None:
        self.wait()
        with self.wrapper.wrap_database_errors:
            self.db.send_query(statement)
        self.pending = True

    def wait(self) -> None:
        if self.pending:
            self.pending = False
            with self.wrapper.wrap_database_errors:
                self.db.read_query_result()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.wait()
            return
        with contextlib.suppress(Exception):  # the exception already raised is the one to report
            self.wait()


def _concrete_fields(model: type[models.Model]) -> list[models.Field]:
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def _auto_now(field: models.Field) -> bool:
    return bool(getattr(field, "auto_now", False))


def _same(value: Any) -> Any:
    return value


def _db_value(field: models.Field) -> Callable[[Any], Any]:
    stored = (
        field.target_field if isinstance(field, models.ForeignKey) else field
    )  # a key holds its target's type
    internal = stored.get_internal_type()
    if internal in _PLAIN_TYPES:
        return _same
    if internal in _REPEATED_TYPES:
        # A flush writes 1,000 partners' rows of each bucket start: convert each distinct value once.
        converted: dict[Any, Any] = {}

        def convert(value: Any) -> Any:
            if value not in converted:
                converted[value] = field.get_db_prep_save(value, connection)
            return converted[value]

        return convert
    return lambda value: field.get_db_prep_save(value, connection)


class _Statement:
    """The parts of one multi-row upsert of ``model`` for rows carrying the fields ``names``."""

    def __init__(
        self, model: type[models.Model], *, names: Sequence[str], key_fields: Sequence[str], now: dt.datetime
    ) -> None:
        fields = _concrete_fields(model)
        given = set(names)
        # A column the rows leave out is inserted with its default and left alone on update.
        updated = [f for f in fields if (f.attname in given and f.attname not in key_fields) or _auto_now(f)]
        # Per column: the row field to read and how to convert it, or the one value every row gets.
        self.columns_from: list[tuple[str | None, Callable[[Any], Any], Any]] = []
        for f in fields:
            prep = _db_value(f)
            if _auto_now(f):
                self.columns_from.append((None, _same, prep(now)))
            elif f.attname in given:
                self.columns_from.append((f.attname, prep, None))
            else:
                self.columns_from.append((None, _same, prep(f.get_default())))
        ops, quote = connection.ops, connection.ops.quote_name
        key_columns = [column(model, name) for name in key_fields]
        columns = ", ".join(quote(field_column(f)) for f in fields)
        self.head = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES "
        self.suffix = ops.on_conflict_suffix_sql(
            fields, OnConflict.UPDATE, [field_column(f) for f in updated] or key_columns[:1], key_columns
        )
        self.fields = fields


def _insert_on_conflict(
    model: type[models.Model],
    rows: list[dict[str, Any]],
    *,
    names: Sequence[str],
    key_fields: Sequence[str],
    now: dt.datetime,
) -> None:
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            for statement in _mysql_statements(model, rows, names=names, key_fields=key_fields, now=now):
                cursor.execute(statement)  # type: ignore[arg-type]  # MySQLdb takes bytes as they are
        return
    parts = _Statement(model, names=names, key_fields=key_fields, now=now)
    row_sql = "(" + ", ".join(["%s"] * len(parts.fields)) + ")"
    size = max(1, min(CHUNK, connection.ops.bulk_batch_size(parts.fields, rows)))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            params: list[Any] = []
            for row in chunk:
                params.extend(prep(row[name]) if name else fixed for name, prep, fixed in parts.columns_from)
            values = ", ".join([row_sql] * len(chunk))
            cursor.execute(f"{parts.head}{values} {parts.suffix}", params)


def _mysql_statements(
    model: type[models.Model],
    rows: list[dict[str, Any]],
    *,
    names: Sequence[str],
    key_fields: Sequence[str],
    now: dt.datetime,
) -> Iterator[bytes]:
    """Yield the MySQL statements that write ``rows``: literals escaped by the driver in C.

    Works column by column: the values of one column are escaped once per distinct value (a flush writes
    1,000 partners' rows of each bucket start, and a few generations), and a column of plain integers is
    formatted without a Python call per value.
    """
    parts = _Statement(model, names=names, key_fields=key_fields, now=now)
    head, suffix = parts.head.encode(), b" " + parts.suffix.encode()
    db = connection.connection  # the MySQLdb connection: the callers have opened it
    template = b"(" + b",".join([b"%s"] * len(parts.columns_from)) + b")"
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        columns = []
        for name, prep, fixed in parts.columns_from:
            if name is None:
                columns.append([db.literal(fixed)] * len(chunk))
            else:
                columns.append(_column_literals(db, list(map(itemgetter(name), chunk)), prep))
        values, size = [], 0
        for row in map(template.__mod__, zip(*columns, strict=True)):
            values.append(row)
            size += len(row)
            if size > MAX_STATEMENT_BYTES:
                yield head + b",".join(values) + suffix
                values, size = [], 0
        if values:
            yield head + b",".join(values) + suffix


def _column_literals(db: Any, values: list[Any], prep: Callable[[Any], Any]) -> list[bytes]:
    """Return the SQL literal of each value of one column (``prep``: the field's conversion for the database)."""
    if set(map(type, values)) == {int}:
        return list(map(b"%d".__mod__, values))
    try:
        literals = {value: db.literal(prep(value)) for value in set(values)}
    except TypeError:  # an unhashable value (a memoryview of bytes): escape each one
        return [db.literal(prep(value)) for value in values]
    return list(map(literals.__getitem__, values))


def _upsert_null_keyed(
    model: type[models.Model], row: dict[str, Any], *, key_fields: Sequence[str], now: dt.datetime
) -> None:
    lookup = {name: row[name] for name in key_fields}
    values = {name: value for name, value in row.items() if name not in key_fields}
    values.update({f.attname: now for f in _concrete_fields(model) if _auto_now(f)})
    if not model._default_manager.filter(**lookup).update(**values):
        model._default_manager.create(**row)
