from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from stats.devtools.demo import LIVE_LOGINS_PER_MINUTE, LIVE_ORDERS_PER_MINUTE, LIVE_RATE, live_traffic
from stats.pipeline.consumer import StopFlag


class Command(BaseCommand):
    help = "Count a trickle of live page views, logins and orders, one batch a second, until stopped (scripts/demo)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rate", type=float, default=LIVE_RATE, help="page views per second")
        parser.add_argument("--logins-per-minute", type=float, default=LIVE_LOGINS_PER_MINUTE)
        parser.add_argument(
            "--orders-per-minute",
            type=float,
            help=f"default {LIVE_ORDERS_PER_MINUTE:g} where order events are counted, else 0",
        )
        parser.add_argument(
            "--seconds", type=int, help="stop after this many seconds (default: SIGTERM/SIGINT)"
        )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(
        self,
        *args: object,
        rate: float,
        logins_per_minute: float,
        orders_per_minute: float | None,
        seconds: int | None,
        **options: object,
    ) -> None:
        if not rate > 0 or logins_per_minute < 0 or (orders_per_minute or 0) < 0:
            raise CommandError(
                "--rate must be above 0, --logins-per-minute and --orders-per-minute at least 0"
            )
        stop = StopFlag()
        stop.install()
        self.stdout.write(
            live_traffic(
                rate=rate,
                logins_per_minute=logins_per_minute,
                orders_per_minute=orders_per_minute,
                stop=stop,
                ticks=seconds,
            ).summary()
        )
