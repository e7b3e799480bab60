"""``consume --processes N``: one command running N members of the consumer group, each a child process.

The members share the topic's partitions as consumers started apart do, so the counts stay exact; the command
stops every member on SIGTERM, fails naming a member that dies, and leaves no member behind when it is killed.
What it checks does not depend on the database: one pass runs each test.
"""

import os
import re
import signal

import pytest

from tests.conftest import KAFKA_SESSION_TIMEOUT_MS
from tests.factories import create_tree
from tests.reliability.flow import assert_counted_exactly, counted_in_redis, produce, todays_traffic
from tests.reliability.procs import Child, patience, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.real_clock]

SESSION_SECONDS = KAFKA_SESSION_TIMEOUT_MS / 1000
STARTED = re.compile(r"started (\d+) consumers: (.*)")


def member_pids(command: Child) -> dict[int, int]:
    """Member number -> pid, from the command's first line, once it is written."""
    wait_until(lambda: STARTED.search(command.stderr()), seconds=60, what="the members to start")
    started = STARTED.search(command.stderr())
    assert started
    return {int(n): int(pid) for n, pid in re.findall(r"(\d+) \(pid (\d+)\)", started.group(2))}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A child the test's process did not start: reaped by init once it exits, but a zombie until then.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1].startswith("Z")


@pytest.mark.one_pass("sqlite")
def test_three_members_in_one_command_count_each_event_once_and_exit_when_the_topic_is_drained(
    kafka_settings, children
):
    create_tree()
    values, truth, day = todays_traffic(events=900, users=300, seed=41, bad_share=0)
    produce(kafka_settings.KAFKA_BOOTSTRAP_SERVERS, kafka_settings.KAFKA_TOPIC, values)
    command = children.start("consume", "--processes", "3", "--batch-size", "100", "--exit-when-idle", "3")
    # Three members join one after another: each join is a rebalance of half a session at the broker.
    waited = patience(len(values), batch=100, more=3 * SESSION_SECONDS)
    assert command.wait(waited) == 0, command.stderr()[-3000:]
    assert sorted(member_pids(command)) == [1, 2, 3]
    # Each member's summary comes through with its number.
    summaries = re.findall(r"^\[(\d)\] counted \d+ events", command.stdout(), re.MULTILINE)
    assert sorted(summaries) == ["1", "2", "3"], command.stdout()
    assert counted_in_redis(kafka_settings) == len(values)
    assert_counted_exactly(truth, day=day, produced=len(values))


def running(command: Child, pids: dict[int, int]) -> None:
    """Wait until every member has logged: it is past Django's start and has its signal handlers."""
    wait_until(
        lambda: all(f"[{n}] " in command.stderr() for n in pids), seconds=60, what="every member to log"
    )


# A test for each pass: together they start 13 Django processes, a minute and a half of a loaded pass.
@pytest.mark.one_pass("mariadb")
def test_a_member_that_dies_stops_the_command_naming_it_and_sigterm_or_a_killed_command_stops_every_member(
    kafka_settings, children
):
    # A member killed: the others are stopped, and the command fails with one line naming it.
    command = children.start("consume", "--processes", "2")
    pids = member_pids(command)
    running(command, pids)
    os.kill(pids[2], signal.SIGKILL)
    assert command.wait(30) == 1
    last = command.stderr().strip().splitlines()[-1]
    assert (
        last
        == f"CommandError: consumer 2 (pid {pids[2]}) was killed by SIGKILL; consumer 1 exited with code 0"
    )
    assert gone(pids[1])

    # SIGTERM, while the members still start: every member stops, and the command exits 0.
    command = children.start("consume", "--processes", "2")
    pids = member_pids(command)
    assert command.terminate(30) == 0, command.stderr()[-3000:]
    assert all(gone(pid) for pid in pids.values())

    # The command killed outright: its members are sent SIGTERM by the kernel and exit.
    command = children.start("consume", "--processes", "2")
    pids = member_pids(command)
    command.kill()
    wait_until(lambda: all(gone(pid) for pid in pids.values()), seconds=30, what="the members to exit")
