"""The benchmarks still run: ``bench/run.py --quick`` end to end, every figure present with a number.

Nothing is timed here: the quick sizes are too small to mean anything, and the machine is shared. The run gets
a database of its own (same engine as this test run), its own Redis prefix and its own broker.
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "bench" / "run.py"

# In the SQLite pass of scripts/test only: the benchmarks' own runs are on MariaDB (bench/README.md), so here the
# engine they would otherwise never meet; each pass's run cost some 30 CPU seconds of the two cores.
pytestmark = [pytest.mark.kafka, pytest.mark.one_pass("sqlite")]


def _figures() -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(RUN.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(RUN.parent))
    return [figure for figure, _, _ in module.FIGURES]


def _bench_database(tmp_path: Path) -> tuple[str, str | None]:
    """A database URL for the benchmark run, of this test run's engine; and the MySQL database to drop after."""
    db = settings.DATABASES["default"]
    if "mysql" in db["ENGINE"]:
        name = f"cps_bench_{uuid.uuid4().hex[:8]}"
        credentials = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        return f"mysql://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{name}", name
    return f"sqlite:///{tmp_path / 'bench.sqlite3'}", None


def _drop_mysql_database(name: str) -> None:
    import MySQLdb

    db = settings.DATABASES["default"]
    connection = MySQLdb.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 3306),
        user=db["USER"],
        passwd=db["PASSWORD"] or "",
    )
    try:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    database_url, mysql_name = _bench_database(tmp_path)
    report = tmp_path / "bench.json"
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("CPS_REDIS_PREFIX", None)
    try:
        done = subprocess.run(
            [sys.executable, str(RUN), "--quick", "--json", str(report)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        if mysql_name:
            _drop_mysql_database(mysql_name)
    assert done.returncode == 0, (
        f"bench/run.py --quick exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    )
    rows = json.loads(report.read_text())
    by_figure = {row["figure"]: row for row in rows}
    assert sorted(by_figure) == sorted(_figures())
    for figure, row in by_figure.items():
        assert isinstance(row["value"], int | float) and math.isfinite(row["value"]), (figure, row)
        assert set(row) >= {"figure", "value", "unit", "target", "baseline", "ratio"}, (figure, row)
