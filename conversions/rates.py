"""The exchange-rate table staff import as CSV (``manage.py import_rates FILE.csv``).

Rows ``currency,valid_from,rate``: units of the reporting currency per unit of ``currency`` from business day
``valid_from`` on. Rates are history that orders were converted at, so a row is only ever added: the same row
imported again is nothing new, a different rate for a day already imported is refused.
"""

import csv
import datetime as dt
import io
import logging
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import iso4217
from django.db import transaction

from conversions.conf import conversion_setting
from conversions.models import ExchangeRate

logger = logging.getLogger(__name__)

EXPECTED_HEADER = ["currency", "valid_from", "rate"]
_RATE_FIELD = ExchangeRate._meta.get_field("rate")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class RateRow:
    line: int
    currency: str
    valid_from: dt.date
    rate: Decimal


@dataclass(frozen=True)
class RateImport:
    """What an import did: rows added, and rows that were already there with the same rate."""

    added: int
    unchanged: int


class RateImportError(Exception):
    """The import was refused; ``errors`` holds one ``"line N: …"`` message per bad row."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} bad row(s); nothing was imported")
        self.errors = errors


def money_exponent(code: str) -> int | None:
    """Return the ISO 4217 minor-unit exponent of ``code``, or None when it is no currency money is kept in."""
    try:
        return iso4217.Currency(code).exponent
    except ValueError:
        return None


def _parse_rate(text: str) -> Decimal | None:
    """A positive decimal the rate column can hold (at most 12 digits either side of the point), or None."""
    if not _DECIMAL.fullmatch(text):
        return None
    try:
        rate = Decimal(text)
    except InvalidOperation:
        return None
    whole, _, fraction = text.partition(".")
    if rate <= 0 or len(whole.lstrip("0")) > _RATE_FIELD.max_digits - _RATE_FIELD.decimal_places:
        return None
    if len(fraction.rstrip("0")) > _RATE_FIELD.decimal_places:
        return None
    return rate


def _parse_row(line: int, cells: list[str]) -> RateRow | str:
    """The row of ``cells``, or the one message that says what is wrong with it."""
    if len(cells) != 3:
        return f"line {line}: expected 3 columns (currency,valid_from,rate), found {len(cells)}"
    currency, day, rate_text = (cell.strip() for cell in cells)
    reporting = conversion_setting("REPORTING_CURRENCY")
    if money_exponent(currency) is None:
        return f"line {line}: {currency!r} is not an ISO 4217 currency with minor units"
    if currency == reporting:
        return f"line {line}: {currency} is the reporting currency; its rate is always 1"
    try:
        if not _DATE.fullmatch(day):
            raise ValueError(day)
        valid_from = dt.date.fromisoformat(day)
    except ValueError:
        return f"line {line}: valid_from must be a date as YYYY-MM-DD, not {day!r}"
    rate = _parse_rate(rate_text)
    if rate is None:
        return (
            f"line {line}: rate must be a decimal number above 0 with at most "
            f"{_RATE_FIELD.decimal_places} decimals, not {rate_text!r}"
        )
    return RateRow(line, currency, valid_from, rate)


def _read_rows(text: str) -> tuple[list[RateRow], list[str]]:
    """Return the rows of ``text`` with their line, and every problem of a single row."""
    reader = csv.reader(io.StringIO(text), strict=True)
    rows: list[RateRow] = []
    errors: list[str] = []
    try:
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header] != EXPECTED_HEADER:
            shown = ",".join(header or [])
            return [], [f"line 1: the header must be {','.join(EXPECTED_HEADER)}, not {shown!r}"]
        while True:
            line = reader.line_num + 1
            cells = next(reader, None)
            if cells is None:
                break
            if any(cell.strip() for cell in cells):
                parsed = _parse_row(line, cells)
                if isinstance(parsed, str):
                    errors.append(parsed)
                else:
                    rows.append(parsed)
    except csv.Error as exc:
        errors.append(f"line {reader.line_num}: not valid CSV ({exc})")
    return rows, errors


def _conflicts(rows: list[RateRow]) -> tuple[list[str], set[tuple[str, dt.date]]]:
    """Return the rows that contradict each other or the table, and the keys already stored as given."""
    errors: list[str] = []
    first: dict[tuple[str, dt.date], RateRow] = {}
    stored = {
        (rate.currency, rate.valid_from): rate.rate
        for rate in ExchangeRate.objects.filter(currency__in={row.currency for row in rows})
    }
    for row in rows:
        key = (row.currency, row.valid_from)
        if key in first:
            errors.append(
                f"line {row.line}: {row.currency} from {row.valid_from} is repeated "
                f"(first on line {first[key].line})"
            )
            continue
        first[key] = row
        if key in stored and stored[key] != row.rate:
            errors.append(
                f"line {row.line}: {row.currency} from {row.valid_from} is already {stored[key].normalize()}, "
                f"not {row.rate.normalize()}; rates are history and are never changed"
            )
    return errors, set(stored)


@transaction.atomic
def rates_import_csv(*, text: str) -> RateImport:
    """Import ``currency,valid_from,rate`` rows all-or-nothing; raise ``RateImportError`` naming every bad line."""
    rows, errors = _read_rows(text)
    conflicts, stored = _conflicts(rows)
    errors += conflicts
    if errors:
        raise RateImportError(sorted(errors, key=lambda e: int(e.split(":")[0].split()[1])))
    new = [row for row in rows if (row.currency, row.valid_from) not in stored]
    ExchangeRate.objects.bulk_create(
        ExchangeRate(currency=row.currency, valid_from=row.valid_from, rate=row.rate) for row in new
    )
    logger.info("imported %d exchange rates (%d already there)", len(new), len(rows) - len(new))
    return RateImport(added=len(new), unchanged=len(rows) - len(new))
