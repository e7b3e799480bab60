"""What a process loads when it starts: ``consume`` and django-q2's workers set Django up (the admin's modules
are imported then) and serve no API, so DRF's serializers and drf-spectacular stay out of them (8 MB each)."""

import subprocess
import sys

from tests.conftest import ROOT

API_ONLY = ("rest_framework.serializers", "drf_spectacular.utils", "drf_spectacular.openapi")


def test_a_consumer_process_loads_no_api_serializers_or_schema_tools():
    probe = (
        "import sys, django; django.setup(); import stats.pipeline.consumer, stats.pipeline.ingest; "
        f"print(sorted(set({API_ONLY!r}) & set(sys.modules)))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert run.stdout.strip() == "[]"
