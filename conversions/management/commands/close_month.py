import datetime as dt
import re

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations
from django.utils import timezone

from conversions.statements import MonthNotOver, close_month
from cpsproject.common.locks import command_errors


class Command(BaseCommand):
    help = (
        "Write one month's statements (one per partner: its ledger entries booked in the month) and close it. "
        "Closing a closed month changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM")

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, month: str, **options: object) -> None:
        if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", month):
            raise CommandError(f"month must be YYYY-MM, not {month!r}")
        first = dt.date(int(month[:4]), int(month[5:]), 1)
        try:
            with command_errors():
                closed = close_month(month=first, now=timezone.now())
        except MonthNotOver as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(closed.summary())
