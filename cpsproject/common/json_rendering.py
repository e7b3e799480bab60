"""The API's JSON renderer: DRF's, plus bodies a view has already rendered to bytes.

A year of partner days is the API's busiest answer; its closed days never change, so the stats endpoint keeps
them rendered and sends ``RenderedJSON``. Building 365 dictionaries and encoding them with ``json.dumps`` on
every request cost more CPU than reading the numbers. Compact JSON sends those bytes as they are; an indented
answer (``Accept: application/json; indent=4``, and the browsable API, which asks this renderer for its page's
JSON block) decodes them first. Anything else renders as DRF renders it.
"""

from typing import Any

import orjson
from rest_framework import renderers


class RenderedJSON(bytes):
    """A complete JSON document, already encoded as UTF-8: sent as it is."""


class JSONRenderer(renderers.JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, RenderedJSON):
            if not self.get_indent(accepted_media_type, renderer_context or {}):
                return bytes(data)
            # orjson reads bytes, not subclasses of it: a memoryview of the same buffer, no copy.
            data = orjson.loads(memoryview(data))
        return super().render(data, accepted_media_type, renderer_context)
