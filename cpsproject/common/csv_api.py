"""The API's side of CSV exports (DRF and drf-spectacular): ``?format=csv`` accepted, and documented.

The streaming writer itself is ``csv_export``, which the admin shares without loading DRF.
"""

from collections.abc import Sequence
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.renderers import BaseRenderer

from cpsproject.common.csv_export import csv_lines


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
