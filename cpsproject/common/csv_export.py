"""CSV exports that stream: rows become encoded lines one at a time, so memory stays flat however many rows.

One writer for the API (``?format=csv``) and the admin's exports::

    csv_lines(rows, header=["date", "pv"], bom=True)      # a generator of UTF-8 lines, header first
    csv_response(rows, header=[...], filename="x.csv")   # a StreamingHttpResponse of those lines

``rows`` is any iterable of sequences (a generator or a queryset's ``.values_list(...).iterator()`` keeps it
lazy); ``None`` is an empty cell, booleans are ``true``/``false``. ``bom=True`` starts the file with a UTF-8 byte-order mark, so Excel reads Chinese partner names as
UTF-8; ``excel_safe=True`` defuses text cells that Excel would run as a formula (``=``, ``+``, ``-``, ``@``).
"""

import csv
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.renderers import BaseRenderer

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


class CSVRenderer(BaseRenderer):
    """Lets DRF views accept ``?format=csv`` (and ``Accept: text/csv``); the views stream the body themselves.

    Rendering a list of flat objects still works (their keys are the header), for a view that returns a
    ``Response`` anyway.
    """

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        items = data if isinstance(data, list) else [data]
        header = list(items[0]) if items and isinstance(items[0], dict) else ["value"]
        rows = ([item.get(k) for k in header] if isinstance(item, dict) else [item] for item in items)
        return b"".join(csv_lines(rows, header=header))


# --- The schema of a CSV-capable endpoint (drf-spectacular) ---------------------------------------------


def csv_format_parameter() -> OpenApiParameter:
    """The documented ``?format=`` parameter: JSON by default, ``csv`` for a streamed CSV body."""
    return OpenApiParameter(
        "format",
        str,
        enum=["json", "csv"],
        description="`csv` streams the rows as text/csv with a header row; JSON by default.",
    )


def csv_response_doc(header: Sequence[str]) -> OpenApiResponse:
    """The documented ``text/csv`` body: a header row, then one line per row."""
    return OpenApiResponse(
        response=OpenApiTypes.STR, description=f"CSV with the header row `{','.join(header)}`."
    )
