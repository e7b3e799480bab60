"""``scripts/demo`` stopped with Ctrl-C and started again shows the day it showed before (issue 31, item 4).

The demo runs as a person runs it: its own directory (database, Redis append-only file), its own ports, the
live trickle flowing. The figures are read from what the person looks at: the dashboard (English), the login
API and ``/metrics`` (the jobs' last successes, to the second), all as the demo user.

The trickle keeps counting (20 page views/s, 30 logins/min) until the interrupt and again after the restart,
so a figure may grow between the two readings by at most what the trickle sends in the time between them. The
sliding windows (the 1 h ranking's 5-minute slots, the last hour's minutes) also move with the clock: the two
readings must fall in one 5-minute slot of business time, or the restart is done again, and the last-hour
chart is compared minute by minute.
"""

import contextlib
import datetime as dt
import html
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from cpsproject.common.timeutil import floor_local, local_day
from stats.devtools.demo import LIVE_LOGINS_PER_MINUTE, LIVE_RATE
from tests.conftest import ROOT, free_port

# The demo brings its own SQLite and redis-server (and the environment of neither pass reaches it).
pytestmark = [pytest.mark.real_clock, pytest.mark.one_pass("sqlite")]

FIRST_DAY_EVENTS = 3000  # a smaller first day than the demo's 50,000: the test starts the demo twice
START_SECONDS = 120
STOP_SECONDS = 45
SLOT_SECONDS = (
    300  # the 1 h ranking's slot: both readings within one, so no slot leaves a window between them
)
# What the demo reads from the environment: the rest of the test's (its database, Redis prefix, settings
# module, clock) must not reach it.
FOREIGN = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "REDIS_CLUSTER", "MONGO_URL", "KAFKA_")


@dataclass(frozen=True)
class Figures:
    """What the dashboard and the login API show at one moment."""

    read_at: float  # time.monotonic()
    slot: dt.datetime
    day: dt.date
    today_pv: int
    today_uv: int
    range_pv: int
    minutes: dict[str, int]  # the last-hour chart: "HH:MM" -> PV
    minute_total: int
    rankings: dict[str, dict[str, int]]  # window -> partner -> PV
    last_flush_shown: str
    last_reconcile_shown: str
    last_success: dict[str, float]  # job -> Unix time, from /metrics
    client_logins_today: int


def _number(text: str) -> int:
    digits = re.sub(r"\D", "", text)
    assert digits, f"no number in {text!r}"
    return int(digits)


def _by_id(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', page)
    assert found, f"no #{element_id} on the dashboard"
    return html.unescape(found.group(1)).strip()


def _section(page: str, element_id: str, end: str) -> str:
    found = re.search(rf'id="{element_id}"(.*?){end}', page, re.S)
    assert found, f"no #{element_id} on the dashboard"
    return found.group(1)


class Demo:
    """``scripts/demo`` in a directory and on ports of its own, started and interrupted as a person does."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port, self.redis_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.runs = 0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN) and not k.startswith("CPS_")}
        return env | {
            "PORT": str(self.port),
            "REDIS_PORT": str(self.redis_port),
            "DEMO_DIR": str(self.directory),
            "DEMO_EVENTS": str(FIRST_DAY_EVENTS),
            "PYTHONUNBUFFERED": "1",
        }

    @property
    def log(self) -> Path:
        return self.directory / f"demo-{self.runs}.log"

    def start(self) -> list[str]:
        """Start the demo, wait for its dashboard; return the lines ``seed_demo`` printed."""
        self.runs += 1
        with self.log.open("wb") as out:
            # A session of its own: the interrupt goes to every process of it, as Ctrl-C in a terminal does.
            self.process = subprocess.Popen(
                ["scripts/demo"],
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # A terminal's Ctrl-C reaches a process that did not ignore it: a test runner started in the
                # background of a shell ignores SIGINT, and exec would hand that on to runserver.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"scripts/demo exited:\n{self.log.read_text()}"
            try:
                if requests.get(f"{self.base}/admin/login/", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"the demo's dashboard did not answer in {START_SECONDS} s:\n{self.log.read_text()}")
        text = self.log.read_text()
        return [
            line
            for line in text.splitlines()
            if re.match(r"(partners|superuser|Redis|yesterday|today)\b", line)
        ]

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the demo's process group; wait for the script and its redis-server to stop."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            left = subprocess.run(
                ["ps", "-o", "pid,stat,wchan:24,nlwp,args", "-g", str(self.process.pid)],
                capture_output=True,
                text=True,
            )
            pytest.fail(f"the demo did not stop {STOP_SECONDS} s after Ctrl-C; still running:\n{left.stdout}")
        assert not _listening(self.redis_port), "the demo's redis-server still runs after Ctrl-C"

    def kill(self) -> None:
        """Stop whatever is left (a failed test): the process group, then the redis-server by its pid file."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        pid_file = ROOT / ".run" / f"redis-{self.redis_port}.pid"
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        (ROOT / ".run" / f"redis-{self.redis_port}.log").unlink(missing_ok=True)

    def session(self) -> requests.Session:
        session = requests.Session()
        session.headers["Accept-Language"] = "en"
        session.get(f"{self.base}/admin/login/", timeout=10)
        response = session.post(
            f"{self.base}/admin/login/",
            data={
                "username": "demo",
                "password": "demo",
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
                "next": "/admin/",
            },
            headers={"Referer": f"{self.base}/admin/login/"},
            timeout=10,
        )
        assert response.ok and "sessionid" in session.cookies, response.text[:500]
        return session

    def figures(self) -> Figures:
        session = self.session()
        read_at, now = time.monotonic(), dt.datetime.now(dt.UTC)
        page = session.get(f"{self.base}/admin/", timeout=30).text
        today = local_day(now)
        logins = session.get(
            f"{self.base}/api/v1/logins/active/",
            params={"user_type": "client", "start": today.isoformat(), "end": today.isoformat()},
            timeout=30,
        ).json()
        metrics = session.get(f"{self.base}/metrics", timeout=30).text
        last_success = {
            job: float(value)
            for job, value in re.findall(
                r'cps_job_last_success_timestamp_seconds\{job="(\w+)"\} (\S+)', metrics
            )
        }
        chart = _section(page, "last-hour", "</section>")
        rankings = {
            window: {
                code: _number(pv)
                for code, pv in re.findall(
                    r'<a href="[^"]*">([^<]+)</a>.*?<td class="pv">([^<]+)</td>',
                    _section(page, f"top-{window}", "</table>"),
                    re.S,
                )
            }
            for window in ("1h", "24h", "7d")
        }
        return Figures(
            read_at=read_at,
            slot=floor_local(now, SLOT_SECONDS),
            day=today,
            today_pv=_number(_by_id(page, "today-pv")),
            today_uv=_number(_by_id(page, "today-uv")),
            range_pv=_number(_by_id(page, "range-pv")),
            minutes={
                label: int(value)
                for label, value in re.findall(r'data-label="([^"]+)" data-value="(\d+)"', chart)
            },
            minute_total=_number(_by_id(page, "minute-total")),
            rankings=rankings,
            last_flush_shown=_by_id(page, "last-flush"),
            last_reconcile_shown=_by_id(page, "last-reconcile"),
            last_success=last_success,
            client_logins_today=logins["count"],
        )


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def demo(tmp_path) -> Iterator[Demo]:
    running = Demo(tmp_path)
    try:
        yield running
    finally:
        running.kill()


def _grew_by_at_most(before: int, after: int, most: float) -> bool:
    return before <= after <= before + most


def test_a_demo_stopped_with_ctrl_c_and_started_again_shows_the_same_day(demo):
    first = demo.start()
    assert any(line.startswith("today ") and "loaded now" in line for line in first), first
    seeded_pv = _number(re.search(r"PV ([\d,]+)", first[-1]).group(1))
    time.sleep(2)  # the trickle counts: what Redis holds unflushed is what a restart without persistence lost
    before = demo.figures()
    assert before.today_pv > seeded_pv, "the trickle counted nothing on top of the seeded day"
    for _attempt in range(3):
        demo.interrupt()
        again = demo.start()
        after = demo.figures()
        if after.slot == before.slot:
            break
        before = after  # a slot of the windows passed during the restart: what left them is not a loss
    else:
        pytest.fail("three restarts in a row straddled a 5-minute slot")

    # What the trickle can have added between the two readings (it sends a tick a second, counted at once).
    seconds = after.read_at - before.read_at + 1
    views, logins = LIVE_RATE * seconds, LIVE_LOGINS_PER_MINUTE / 60 * seconds + 1
    assert _grew_by_at_most(before.today_pv, after.today_pv, views), (
        before.today_pv,
        after.today_pv,
        seconds,
    )
    assert _grew_by_at_most(before.today_uv, after.today_uv, views), (before.today_uv, after.today_uv)
    assert _grew_by_at_most(before.range_pv, after.range_pv, views), (before.range_pv, after.range_pv)
    assert _grew_by_at_most(before.client_logins_today, after.client_logins_today, logins), (
        before.client_logins_today,
        after.client_logins_today,
    )
    for window, board in before.rankings.items():
        assert board, f"the {window} ranking was empty before the restart"
        for code, pv in board.items():
            if code in after.rankings[window]:
                assert _grew_by_at_most(pv, after.rankings[window][code], views), (window, code, pv)
            else:  # pushed out of the top 10 only by a partner that overtook it
                assert min(after.rankings[window].values()) >= pv, (window, code, after.rankings[window])
    # The last hour slides a minute at a time: every minute both readings show has kept its count.
    shared = before.minutes.keys() & after.minutes.keys()
    assert len(shared) >= 55, (sorted(before.minutes), sorted(after.minutes))
    growth = sum(after.minutes[m] - before.minutes[m] for m in shared)
    assert all(after.minutes[m] >= before.minutes[m] for m in shared), (before.minutes, after.minutes)
    assert growth <= views, growth
    assert (before.minute_total, after.minute_total) == (
        sum(before.minutes.values()),
        sum(after.minutes.values()),
    )
    # The jobs' last successes are kept (a flush may have run since), and the dashboard shows them.
    for job in ("flush", "reconcile"):
        assert before.last_success[job] <= after.last_success[job], job
    assert after.last_reconcile_shown == before.last_reconcile_shown != "—"
    assert after.last_flush_shown != "—"

    # The start-up line says what it kept, with the figures it measured in between the two readings.
    redis_line = next(line for line in again if line.startswith("Redis "))
    assert "keeps its data in an append-only file" in redis_line and "kept the" in redis_line, redis_line
    today_line = next(line for line in again if line.startswith("today "))
    kept = re.fullmatch(rf"today {after.day}: kept: PV ([\d,]+), UV ([\d,]+)", today_line)
    assert kept, today_line
    # Measured before the trickle started again: nothing the trickle adds later can hide a loss here.
    assert before.today_pv <= _number(kept.group(1)) <= after.today_pv, today_line
    assert before.today_uv <= _number(kept.group(2)) <= after.today_uv, today_line
    demo.interrupt()
