"""Listed networks: the ranges staff import (``import_networks FILE.csv``) and the consumer's copy of them.

The consumer looks an address up in memory, by bisection over sorted integer ranges (``signals.Ranges``), not
in Redis: a lookup per view costs a microsecond, and the list changes when staff import a new one. It reads
the list again when the table's (count, last id, last import time) changed, one small query per batch.
"""

import csv
import io
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Max

from quality.models import ListedNetwork
from quality.signals import Ranges, cidr_range


class NetworkFileError(Exception):
    """The file was refused as a whole; the message names every bad line."""


@dataclass(frozen=True)
class ImportResult:
    networks: int

    def summary(self) -> str:
        return f"imported {self.networks} listed networks (the previous list is replaced)"


def _rows(text: str) -> list[tuple[str, str]]:
    rows, errors = [], []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        cidr = row[0].strip()
        if number == 1 and cidr.lower() == "cidr":
            continue  # the header
        label = row[1].strip() if len(row) > 1 else ""
        if len(row) > 2:
            errors.append(f"line {number}: {len(row)} columns, expected cidr,label")
            continue
        try:
            cidr_range(cidr)
        except ValueError:
            errors.append(f"line {number}: {cidr[:60]!r} is not an IPv4 or IPv6 network")
            continue
        if len(label) > 100:
            errors.append(f"line {number}: the label is longer than 100 characters")
            continue
        rows.append((cidr, label))
    if errors:
        raise NetworkFileError(
            "; ".join(errors[:20]) + (f"; and {len(errors) - 20} more" if len(errors) > 20 else "")
        )
    return rows


def import_networks(text: str) -> ImportResult:
    """Replace the listed networks with the ``cidr,label`` rows of ``text``, all or nothing."""
    rows = _rows(text)
    with transaction.atomic():
        ListedNetwork.objects.all().delete()
        ListedNetwork.objects.bulk_create(ListedNetwork(cidr=cidr, label=label) for cidr, label in rows)
    return ImportResult(len(rows))


_cached: tuple[tuple, Ranges] | None = None


def listed_ranges() -> Ranges:
    """Return the listed networks as ranges, read again only when the table changed."""
    global _cached
    # The time too: SQLite may give a rolled-back import's ids to the next one.
    stamp_row = ListedNetwork.objects.aggregate(count=Count("id"), last=Max("id"), at=Max("imported_at"))
    stamp = (stamp_row["count"], stamp_row["last"], stamp_row["at"])
    if _cached is None or _cached[0] != stamp:
        ranges = Ranges(cidr_range(cidr) for cidr in ListedNetwork.objects.values_list("cidr", flat=True))
        _cached = (stamp, ranges)
    return _cached[1]
