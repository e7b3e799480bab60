"""Plain-row writes that work the same on MySQL and SQLite: absolute-value upserts (NULL keys included) and inserts.

Both build multi-row statements once per chunk from Django's own backend operations: no model instances, no ORM
query building per row. On MySQL the statement is built here with the driver's C escaping, each distinct value
of a column escaped once: mysqlclient would quote every parameter through Python calls, which cost about as much
as MariaDB spends inserting the rows.

- ``upsert_rows``: one multi-row ``INSERT … ON DUPLICATE KEY UPDATE`` (MySQL, MariaDB) or ``INSERT … ON CONFLICT
  (key) DO UPDATE`` (SQLite, PostgreSQL) per chunk for the rows whose key has no NULL. A unique constraint does
  not stop duplicate NULL keys (MySQL, SQLite and PostgreSQL alike), so rows with a NULL in their key (the
  site-wide rows, a handful per flush) are matched with an UPDATE and inserted only when it found nothing.
- ``upsert_chunks``: a stream of chunks, each chunk's statement sent before the next chunk is asked for, so that
  on MySQL whatever produces the rows (a flush reading Redis) runs while the database inserts.
- ``insert_rows``: a plain ``INSERT`` of tuples, never an upsert (a taken unique key raises ``IntegrityError``),
  returning the keys of the rows when asked: ``RETURNING`` where the backend has it (MariaDB, SQLite), else
  read back (MySQL).
"""

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
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
        "PositiveSmallIntegerField",
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


def insert_rows(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Sequence[tuple],
    *,
    now: dt.datetime,
    key: str | None = None,
) -> dict[Any, int]:
    """Insert ``rows`` (tuples of the values of ``fields``; ``auto_now_add`` fields get ``now``) from plain
    tuples, no model instances, in one statement (a few for thousands of rows). Return {``key`` value: pk} of
    the rows when ``key`` is given, else {}. Never an upsert: a row whose unique key is taken fails the insert
    (``IntegrityError``), as ``bulk_create`` does."""
    if not rows:
        return {}
    given, auto = _insert_columns(model, fields)
    columns = [_db_column(f, values) for f, values in zip(given, zip(*rows, strict=True), strict=True)]
    columns += [[f.get_db_prep_save(now, connection)] * len(rows) for f in auto]
    quote = connection.ops.quote_name
    names = ", ".join(quote(field_column(f)) for f in given + auto)
    head = f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES "
    tail = ""
    if key is not None and connection.features.can_return_rows_from_bulk_insert:
        tail = f" RETURNING {quote(column(model, key))}, {quote(column(model, 'id'))}"
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            ids = _insert_mysql(cursor, head, columns, tail)
        else:
            ids = _insert_with_parameters(cursor, head, list(zip(*columns, strict=True)), tail, given + auto)
    if key is not None and not tail:  # MySQL: no RETURNING, the keys read back
        keys = [row[fields.index(key)] for row in rows]
        ids.update(model._default_manager.filter(**{f"{key}__in": keys}).values_list(key, "pk"))
    return ids


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
    """Return the conversion of ``field``'s values to what Django sends the database (the identity for plain
    types)."""
    stored = (
        field.target_field if isinstance(field, models.ForeignKey) else field
    )  # a key holds its target's type
    internal = stored.get_internal_type()
    if internal in _PLAIN_TYPES:
        return _same
    prep = _prep_save(field, internal)
    if internal in _REPEATED_TYPES:
        # A flush writes 1,000 partners' rows of each bucket start: convert each distinct value once.
        converted: dict[Any, Any] = {}

        def convert(value: Any) -> Any:
            if value not in converted:
                converted[value] = prep(value)
            return converted[value]

        return convert
    return prep


def _prep_save(field: models.Field, internal: str) -> Callable[[Any], Any]:
    if internal != "DateTimeField":
        return partial(field.get_db_prep_save, connection=connection)
    adapt = connection.ops.adapt_datetimefield_value

    def convert(value: Any) -> Any:
        # An aware time skips the field's checks for a naive one: what Django does with it, at a third the cost.
        if isinstance(value, dt.datetime) and value.utcoffset() is not None:
            return adapt(value)
        return field.get_db_prep_save(value, connection)

    return convert


def _db_column(field: models.Field, values: Sequence[Any]) -> Sequence[Any]:
    """Return ``values`` of ``field`` as Django sends them to the database, each distinct value converted once
    (a batch's rows share their days, rates and events' times)."""
    prep = _db_value(field)
    if prep is _same:
        return values
    try:
        converted = {value: prep(value) for value in set(values)}
    except TypeError:  # unhashable: a JSON list
        return list(map(prep, values))
    return list(map(converted.__getitem__, values))


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
    values = [
        tuple(prep(row[name]) if name else fixed for name, prep, fixed in parts.columns_from) for row in rows
    ]
    with connection.cursor() as cursor:
        for sql, params in _parameter_statements(parts.head, values, " " + parts.suffix, parts.fields):
            cursor.execute(sql, params)


def _parameter_statements(
    head: str, rows: Sequence[tuple], tail: str, fields: list[models.Field]
) -> Iterator[tuple[str, list[Any]]]:
    """Yield (SQL, parameters) of statements of as many rows as the backend binds in one (SQLite: 999 values),
    ``CHUNK`` at the most."""
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    size = max(1, min(CHUNK, connection.ops.bulk_batch_size(fields, rows)))
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        yield head + ", ".join([row_sql] * len(chunk)) + tail, [value for row in chunk for value in row]


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
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        columns = []
        for name, prep, fixed in parts.columns_from:
            if name is None:
                columns.append([db.literal(fixed)] * len(chunk))
            else:
                columns.append(_column_literals(db, list(map(itemgetter(name), chunk)), prep))
        yield from _joined(head, _row_literals(columns), suffix)


def _row_literals(columns: Sequence[Sequence[bytes]]) -> Iterator[bytes]:
    """Return each row's ``(…)`` of the SQL literals of its columns."""
    template = b"(" + b",".join([b"%s"] * len(columns)) + b")"
    return map(template.__mod__, zip(*columns, strict=True))


def _joined(head: bytes, rows: Iterable[bytes], tail: bytes) -> Iterator[bytes]:
    """Yield ``head`` + rows separated by commas + ``tail``: a statement each time ``MAX_STATEMENT_BYTES`` is
    passed, then one of the rows left."""
    values, size = [], 0
    for row in rows:
        values.append(row)
        size += len(row) + 1
        if size > MAX_STATEMENT_BYTES:
            yield head + b",".join(values) + tail
            values, size = [], 0
    if values:
        yield head + b",".join(values) + tail


def _column_literals(db: Any, values: Sequence[Any], prep: Callable[[Any], Any]) -> list[bytes]:
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


# --- insert_rows -----------------------------------------------------------------------------------------------


def _insert_columns(
    model: type[models.Model], fields: Sequence[str]
) -> tuple[list[models.Field], list[models.Field]]:
    """Return the fields named ``fields`` and the ``auto_now_add`` ones; raise ``ValueError`` if that leaves
    out a column (a field added to the model, say)."""
    meta = model._meta
    given = [f for f in map(meta.get_field, fields) if isinstance(f, models.Field)]
    auto = [f for f in meta.concrete_fields if getattr(f, "auto_now_add", False)]
    missing = {f.attname for f in _concrete_fields(model)} - {f.attname for f in given + auto}
    if missing or len(given) != len(fields):
        raise ValueError(f"{meta.label}: no value for {', '.join(sorted(missing)) or 'a relation'}")
    return given, auto


def _insert_mysql(cursor: Any, head: str, columns: Sequence[Sequence[Any]], tail: str) -> dict[Any, int]:
    """Insert the rows of ``columns`` (database values) as literals, in statements of up to
    ``MAX_STATEMENT_BYTES``; return what ``tail`` returns."""
    db = connection.connection  # the MySQLdb connection: the caller's cursor has opened it
    rows = _row_literals([_column_literals(db, values, _same) for values in columns])
    returned: dict[Any, int] = {}
    for statement in _joined(head.encode(), rows, tail.encode()):
        cursor.execute(statement)
        if tail:
            returned.update(cursor.fetchall())
    return returned


def _insert_with_parameters(
    cursor: Any, head: str, rows: list[tuple], tail: str, fields: list[models.Field]
) -> dict[Any, int]:
    """Insert through the driver's parameters (SQLite): one ``executemany``, or, to return the keys, statements
    of as many rows as bulk_create puts in one (SQLite binds at most 999 values a statement)."""
    if not tail:
        cursor.executemany(head + "(" + ", ".join(["%s"] * len(fields)) + ")", rows)
        return {}
    returned: dict[Any, int] = {}
    for sql, params in _parameter_statements(head, rows, tail, fields):
        cursor.execute(sql, params)
        returned.update(cursor.fetchall())
    return returned
