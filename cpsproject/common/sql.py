"""Raw reads for the API's busiest requests, where building the query costs more than running it.

The ORM spends about a millisecond of CPU building and compiling each aggregate query; a request of a year of
figures runs several, on every request. These read the same rows with the statement written out, and turn the
values the database drivers answer differently (SQLite's dates as text, MariaDB's sums as decimals) into one
Python type.
"""

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import connection, models

from cpsproject.common.columns import column


def fetch_rows(query: str, params: Sequence[Any]) -> list[tuple]:
    """Rows of one raw query on the default database."""
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchall()


def quoted_table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def quoted_column(model: type[models.Model], name: str) -> str:
    """``model``'s field ``name`` as its quoted column (``date`` and ``status`` are keywords somewhere)."""
    return connection.ops.quote_name(column(model, name))


def as_date(value: dt.date | str) -> dt.date:
    # SQLite answers a raw query's date column as text.
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


def as_datetime(value: dt.datetime | str) -> dt.datetime:
    """A datetime column as an aware datetime: both backends store UTC, SQLite as text, MariaDB without a zone."""
    moment = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def as_int(value: int | Decimal | None) -> int:
    """A count or sum as an int: MariaDB sums integers as DECIMAL, and the sum of no rows is NULL."""
    return int(value) if value is not None else 0
