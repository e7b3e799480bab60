import datetime as dt
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations
from django.utils import timezone
from kafka import KafkaProducer

from cpsproject.common.timeutil import local_day
from stats.devtools.order_truth import SAMPLE_RATES
from stats.devtools.producer import BrokerUnavailable, kafka_producer, send_to_kafka, write_to_file
from stats.devtools.simulate import GroundTruth, simulate_events


class Command(BaseCommand):
    help = "Generate synthetic traffic over the partner tree and print its exact ground truth."

    def add_arguments(self, parser: CommandParser) -> None:
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
        parser.add_argument(
            "--orders-share",
            type=float,
            default=0.0,
            help="this share of the events are orders (late, repeated, out of order, refunded, in three "
            "currencies), with their truth printed (default: 0, page views only)",
        )
        parser.add_argument(
            "--rates",
            default=str(SAMPLE_RATES),
            help="currency,valid_from,rate CSV the orders' truth converts by",
        )
        parser.add_argument("--truth", help="also write the orders' truth to this JSON file")

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(
        self,
        *args: object,
        events: int,
        partners: int | None,
        users: int,
        date: str | None,
        to: str,
        seed: int | None,
        rate: float | None,
        orders_share: float,
        rates: str,
        truth: str | None,
        **options: object,
    ) -> None:
        now = timezone.now()
        day = _checked(
            events=events,
            users=users,
            rate=rate,
            orders_share=orders_share,
            rates=rates,
            date=date,
            to=to,
            now=now,
        )
        try:
            # Before generating: a million events take a while, and an unreachable broker should fail at once.
            producer = kafka_producer() if to == "kafka" else None
        except BrokerUnavailable as exc:
            raise CommandError(str(exc)) from exc

        def progress(done: int) -> None:
            self.stderr.write(f"generated {done}/{events} events")

        try:
            values, expected = simulate_events(
                events=events,
                day=day,
                users=users,
                partners=partners,
                seed=seed,
                until=now,
                rate=rate,
                progress=progress,
                orders_share=orders_share,
                rates=Path(rates),
            )
        except ValueError as exc:  # a rates file that does not convert the simulated orders
            raise CommandError(f"--rates {rates}: {exc}") from exc
        self.send(values, producer=producer, to=to)
        self.print_truth(expected, truth_file=truth)
        orders = len(expected.orders.orders)
        of_orders = f", {orders} orders" if orders else ""
        self.stdout.write(
            f"{len(values)} events ({expected.bad} bad, {sum(expected.bot_pv.values())} bot{of_orders}) to {to}"
        )

    def send(self, values: list[bytes], *, producer: KafkaProducer | None, to: str) -> None:
        """Send ``values`` with ``producer``, or without one to the file ``to`` names."""
        if producer is not None:
            send_to_kafka(
                values,
                producer=producer,
                progress=lambda n: self.stderr.write(f"sent {n}/{len(values)} to Kafka"),
            )
        else:
            write_to_file(Path(to.removeprefix("file:")), values)

    def print_truth(self, expected: GroundTruth, *, truth_file: str | None) -> None:
        """Print the page views' truth, then the orders' if there are any (also to ``truth_file`` as JSON)."""
        for line in expected.table():
            self.stdout.write(line)
        if expected.orders.orders:
            self.stdout.write(f"orders in {expected.orders.terms.reporting_currency} minor units:")
            for line in expected.orders.table():
                self.stdout.write(line)
        if truth_file:
            figures = {
                "currency": expected.orders.terms.reporting_currency,
                "partners": expected.orders.figures(),
            }
            Path(truth_file).write_text(json.dumps(figures, indent=1), encoding="utf-8")


def _checked(
    *,
    events: int,
    users: int,
    rate: float | None,
    orders_share: float,
    rates: str,
    date: str | None,
    to: str,
    now: dt.datetime,
) -> dt.date:
    """Refuse options that cannot make a run (``CommandError``, the first one wrong); return the day."""
    if events < 1 or users < 1:
        raise CommandError("--events and --users must be at least 1")
    if rate is not None and not rate > 0:
        raise CommandError(f"--rate must be a positive number of events per second, not {rate}")
    if not 0 <= orders_share <= 1:
        raise CommandError(f"--orders-share must be from 0 to 1, not {orders_share}")
    if orders_share and not Path(rates).is_file():
        raise CommandError(f"--rates {rates}: no such file")
    try:
        day = dt.date.fromisoformat(date) if date else local_day(now)
    except ValueError as exc:
        raise CommandError(f"--date must be YYYY-MM-DD, not {date!r}") from exc
    if to != "kafka" and not to.startswith("file:"):
        raise CommandError(f"--to must be kafka or file:PATH, not {to!r}")
    return day
