"""Where a test run's time goes: a pytest plugin that records it, and the tables made from the record.

Record a pass (under xdist too: the controller receives every worker's reports)::

    PYTHONPATH=scripts CPS_DURATIONS_FILE=.run/durations-mariadb.jsonl .venv/bin/pytest -p durations_report

Print the tables (the slowest tests, the time per folder, fixtures against test bodies)::

    .venv/bin/python scripts/durations_report.py .run/durations-mariadb.jsonl

A test's time is its setup, call and teardown: setup and teardown are the fixtures' share (a session-scoped
fixture is charged to the first test that asks for it), the call is the test body's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

PHASES = ("setup", "call", "teardown")


class DurationsRecorder:
    def __init__(self, path: Path) -> None:
        self._file = path.open("w", encoding="utf-8")
        self._started = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        line = {"nodeid": report.nodeid, "when": report.when, "seconds": round(report.duration, 4)}
        self._file.write(json.dumps(line) + "\n")

    def pytest_sessionfinish(self, session) -> None:
        wall = round(time.monotonic() - self._started, 2)
        self._file.write(json.dumps({"wall_seconds": wall}) + "\n")
        self._file.close()


def pytest_configure(config) -> None:
    path = os.environ.get("CPS_DURATIONS_FILE")
    # Only the controller records: xdist workers forward their reports to it.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationsRecorder(Path(path)), "cps-durations-recorder")


def _read(path: Path) -> tuple[dict[str, dict[str, float]], int, float | None]:
    """Times per test id (a test parametrized under one id, like the schema fuzz test, adds its runs up), how
    many tests ran, and the pass's wall time."""
    tests: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    runs, wall = 0, None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        if "wall_seconds" in line:
            wall = line["wall_seconds"]
        else:
            tests[line["nodeid"]][line["when"]] += line["seconds"]
            runs += line["when"] == "call"
    return tests, runs, wall


def _folder(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:-1]) or parts[0]


def _table(headers: tuple[str, ...], rows: list[tuple]) -> str:
    cells = [headers, *[tuple(str(value) for value in row) for row in rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = [
        "| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |"
        for row in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


def report(path: Path, slowest: int) -> str:
    tests, runs, wall = _read(path)
    total = {nodeid: sum(phases.values()) for nodeid, phases in tests.items()}
    fixtures = sum(phases["setup"] + phases["teardown"] for phases in tests.values())
    bodies = sum(phases["call"] for phases in tests.values())

    out = [
        f"## {path.name}: {runs} tests, {fixtures + bodies:,.1f} s of test time, wall {wall or '?'} s",
        "",
    ]
    ranked = sorted(total, key=total.get, reverse=True)[:slowest]
    rows = [
        (rank, nodeid, f"{total[nodeid]:.1f}", f"{tests[nodeid]['setup'] + tests[nodeid]['teardown']:.1f}")
        for rank, nodeid in enumerate(ranked, 1)
    ]
    out += [
        f"The {slowest} slowest tests (seconds):",
        "",
        _table(("#", "test", "total", "fixtures"), rows),
        "",
    ]

    folders: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for nodeid, phases in tests.items():
        entry = folders[_folder(nodeid)]
        entry[0] += 1
        entry[1] += phases["setup"] + phases["teardown"]
        entry[2] += phases["call"]
    rows = [
        (
            folder,
            count,
            f"{fixture_seconds + body_seconds:.1f}",
            f"{fixture_seconds:.1f}",
            f"{body_seconds:.1f}",
        )
        for folder, (count, fixture_seconds, body_seconds) in sorted(
            folders.items(), key=lambda item: item[1][1] + item[1][2], reverse=True
        )
    ]
    out += [
        "Time per folder (seconds):",
        "",
        _table(("folder", "tests", "total", "fixtures", "bodies"), rows),
        "",
    ]
    out.append(f"Fixtures (setup + teardown): {fixtures:,.1f} s; test bodies (call): {bodies:,.1f} s.")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="files written with CPS_DURATIONS_FILE")
    parser.add_argument("--slowest", type=int, default=20)
    arguments = parser.parse_args()
    print("\n\n".join(report(path, arguments.slowest) for path in arguments.files))


if __name__ == "__main__":
    main()
