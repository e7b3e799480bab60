"""CSV exports that stream: rows become encoded lines one at a time, so memory stays flat however many rows.

One writer for the API (``?format=csv``, with DRF's side in ``csv_api``) and the admin's exports::

    csv_lines(rows, header=["date", "pv"], bom=True)      # a generator of UTF-8 lines, header first
    csv_response(rows, header=[...], filename="x.csv")   # a StreamingHttpResponse of those lines

``rows`` is any iterable of sequences (a generator or a queryset's ``.values_list(...).iterator()`` keeps it
lazy); ``None`` is an empty cell, booleans are ``true``/``false``. ``bom=True`` starts the file with a UTF-8 byte-order mark, so Excel reads Chinese partner names as
UTF-8; ``excel_safe=True`` defuses text cells that Excel would run as a formula (``=``, ``+``, ``-``, ``@``).

Plain Django only: the admin's exports import this module, and every process (``consume``, django-q2's workers)
loads the admin's modules at start-up; DRF's serializers and drf-spectacular would add 8 MB to each.
"""

import csv
from collections.abc import Iterable, Iterator, Sequence

from django.http import StreamingHttpResponse

BOM = "\ufeff"
CONTENT_TYPE = "text/csv; charset=utf-8"
# Lines are sent in chunks of about this many bytes: one write per line would cost a syscall per row.
CHUNK_BYTES = 64 * 1024
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    """A file-like object whose ``write`` returns the line: ``csv.writer`` then formats one row at a time."""

    def write(self, value: str) -> str:
        return value


def _cells(row: Sequence[object], excel_safe: bool) -> list[object]:
    """Booleans as JSON writes them (``true``/``false``, not Python's ``True``); formulas defused if asked."""
    cells = ["true" if v is True else "false" if v is False else v for v in row]
    if excel_safe:
        cells = [f"'{v}" if isinstance(v, str) and v.startswith(_FORMULA_START) else v for v in cells]
    return cells


def csv_lines(
    rows: Iterable[Sequence[object]],
    *,
    header: Sequence[str],
    bom: bool = False,
    excel_safe: bool = False,
    encoding: str = "utf-8",
) -> Iterator[bytes]:
    """Yield the header line, then one encoded CSV line (RFC 4180, CRLF) per row; nothing is held back."""
    writer = csv.writer(_Echo())
    yield ((BOM if bom else "") + writer.writerow(header)).encode(encoding)
    for row in rows:
        yield writer.writerow(_cells(row, excel_safe)).encode(encoding)


def chunked(lines: Iterable[bytes], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Join lines into chunks of about ``size`` bytes (at most one chunk in memory)."""
    chunk: list[bytes] = []
    held = 0
    for line in lines:
        chunk.append(line)
        held += len(line)
        if held >= size:
            yield b"".join(chunk)
            chunk, held = [], 0
    if chunk:
        yield b"".join(chunk)


def csv_response(
    rows: Iterable[Sequence[object]],
    *,
    header: Sequence[str],
    filename: str,
    bom: bool = False,
    excel_safe: bool = False,
) -> StreamingHttpResponse:
    """A streamed ``text/csv`` download of ``rows`` under ``header``, saved as ``filename``."""
    response = StreamingHttpResponse(
        chunked(csv_lines(rows, header=header, bom=bom, excel_safe=excel_safe)), content_type=CONTENT_TYPE
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
