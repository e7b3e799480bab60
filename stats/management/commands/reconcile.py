import datetime as dt

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from cpsproject.common.locks import command_errors
from stats.jobs.reconcile import ReconcileRefused, default_reconcile_day, reconcile_closed_day


class Command(BaseCommand):
    help = "Recount one business day (default yesterday) exactly from the raw-event archive."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--date", help="YYYY-MM-DD (default: yesterday in the business time zone)")

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, date: str | None, **options: object) -> None:
        try:
            day = dt.date.fromisoformat(date) if date else default_reconcile_day()
        except ValueError as exc:
            raise CommandError(f"--date must be YYYY-MM-DD, not {date!r}") from exc
        with command_errors():
            try:
                self.stdout.write(reconcile_closed_day(day=day).summary())
            except ReconcileRefused as exc:
                raise CommandError(str(exc)) from exc
