import datetime as dt
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quality.simulation import EXPECTED_CHANGES, EXPECTED_FINDINGS, LISTED_NETWORKS, PARTNERS, simulated_week


class Command(BaseCommand):
    help = (
        "Write a simulated week of traffic with known honest and bad partners (quality.simulation) to a file "
        "that consume --source file: replays, and print the findings, spikes and drops it must raise."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--date", required=True, help="YYYY-MM-DD: the judged business day (the last)")
        parser.add_argument("--to", required=True, help="file:PATH (JSON lines, one event a line)")
        parser.add_argument(
            "--networks", help="also write the listed networks CSV (for import_networks) here"
        )

    def handle(self, *args: object, date: str, to: str, networks: str | None, **options: object) -> None:
        try:
            day = dt.date.fromisoformat(date)
        except ValueError as exc:
            raise CommandError(f"--date {date!r} is not YYYY-MM-DD") from exc
        if not to.startswith("file:"):
            raise CommandError("--to must be file:PATH")
        week = simulated_week(day)
        with Path(to.removeprefix("file:")).open("wb") as out:
            for events in week.values():
                out.writelines(event.value + b"\n" for event in events)
        if networks:
            Path(networks).write_text(LISTED_NETWORKS)
        total = sum(len(events) for events in week.values())
        self.stdout.write(f"wrote {total} events of {len(week)} days for partners {', '.join(PARTNERS)}")
        for (code, rule), value in sorted(EXPECTED_FINDINGS.items()):
            self.stdout.write(f"finding {code} {rule} {value}")
        for code, (direction, views, median) in sorted(EXPECTED_CHANGES.items()):
            self.stdout.write(
                f"{direction} {code}: {views} views in the last hour against a median of {median}"
            )
