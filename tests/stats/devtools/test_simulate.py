"""``manage.py simulate``: synthetic traffic whose event ids never collide between runs unless asked to."""

import json
import socket
import time

import pytest
from django.core.management import CommandError, call_command

from tests.factories import create_tree

pytestmark = pytest.mark.django_db


def simulated_ids(tmp_path, name: str, *extra: str) -> set[str]:
    path = tmp_path / name
    call_command("simulate", "--events", "200", "--users", "20", "--to", f"file:{path}", *extra)
    ids = set()
    for line in path.read_bytes().splitlines():
        try:
            event = json.loads(line)
        except ValueError:  # the simulated malformed messages
            continue
        if isinstance(event, dict) and str(event.get("event_id", "")).startswith("sim-"):
            ids.add(event["event_id"])
    return ids


def test_two_runs_without_a_seed_share_no_event_id(tmp_path):
    create_tree()
    first, second = simulated_ids(tmp_path, "1.jsonl"), simulated_ids(tmp_path, "2.jsonl")
    assert len(first) > 150 and len(second) > 150  # 200 events, about 1% malformed
    assert first.isdisjoint(second)


def test_a_seed_repeats_a_run_event_ids_included(tmp_path):
    create_tree()
    assert simulated_ids(tmp_path, "1.jsonl", "--seed", "5") == simulated_ids(
        tmp_path, "2.jsonl", "--seed", "5"
    )


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_simulate_without_a_reachable_broker_fails_within_seconds_naming_it(settings):
    create_tree()
    servers = f"127.0.0.1:{unused_port()}"
    settings.KAFKA_BOOTSTRAP_SERVERS = servers
    started = time.monotonic()
    with pytest.raises(CommandError) as failed:
        call_command("simulate", "--events", "10")
    assert time.monotonic() - started < 10
    assert str(failed.value) == (
        f"no Kafka broker answered at {servers} (KAFKA_BOOTSTRAP_SERVERS) within 5 s; nothing was sent"
    )
