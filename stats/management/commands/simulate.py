import datetime as dt
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, no_translations
from django.utils import timezone

from cpsproject.common.timeutil import local_day
from stats.devtools.producer import BrokerUnavailable, kafka_producer, send_to_kafka, write_to_file
from stats.devtools.simulate import simulate_events


class Command(BaseCommand):
    help = "Generate synthetic traffic over the partner tree and print its exact ground truth."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--events", type=int, required=True)
        parser.add_argument("--partners", type=int, help="use only the first P partners (by code)")
        parser.add_argument("--users", type=int, default=1000, help="size of the openid pool")
        parser.add_argument("--date", help="YYYY-MM-DD business day (default: today, up to now)")
        parser.add_argument("--to", default="kafka", help="kafka (default) or file:PATH")
        parser.add_argument(
            "--seed",
            type=int,
            help="repeat a run exactly, event ids included (default: new traffic and new ids)",
        )
        parser.add_argument(
            "--rate",
            type=float,
            help="live traffic: timestamps rise at RATE events per second, the last one now "
            "(default: random moments of --date)",
        )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(
        self,
        *args,
        events: int,
        partners,
        users: int,
        date,
        to: str,
        seed: int | None,
        rate: float | None,
        **options,
    ) -> None:
        if events < 1 or users < 1:
            raise CommandError("--events and --users must be at least 1")
        if rate is not None and not rate > 0:
            raise CommandError(f"--rate must be a positive number of events per second, not {rate}")
        now = timezone.now()
        try:
            day = dt.date.fromisoformat(date) if date else local_day(now)
        except ValueError as exc:
            raise CommandError(f"--date must be YYYY-MM-DD, not {date!r}") from exc

        if to != "kafka" and not to.startswith("file:"):
            raise CommandError(f"--to must be kafka or file:PATH, not {to!r}")
        try:
            # Before generating: a million events take a while, and an unreachable broker should fail at once.
            producer = kafka_producer() if to == "kafka" else None
        except BrokerUnavailable as exc:
            raise CommandError(str(exc)) from exc

        def progress(done: int) -> None:
            self.stderr.write(f"generated {done}/{events} events")

        values, truth = simulate_events(
            events=events,
            day=day,
            users=users,
            partners=partners,
            seed=seed,
            until=now,
            rate=rate,
            progress=progress,
        )
        if producer is not None:
            send_to_kafka(
                values,
                producer=producer,
                progress=lambda n: self.stderr.write(f"sent {n}/{len(values)} to Kafka"),
            )
        else:
            write_to_file(Path(to.removeprefix("file:")), values)
        for line in truth.table():
            self.stdout.write(line)
        self.stdout.write(f"{len(values)} events ({truth.bad} bad, {sum(truth.bot_pv.values())} bot) to {to}")
