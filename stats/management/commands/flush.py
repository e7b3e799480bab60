from django.core.management.base import BaseCommand, CommandError

from stats.flush import flush
from stats.locks import LockBusy


class Command(BaseCommand):
    help = "Flush settled PV buckets and UV counts from Redis to the SQL tables now."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--include-open", action="store_true", help="also write buckets that are still open"
        )

    def handle(self, *args, include_open: bool, **options) -> None:
        try:
            self.stdout.write(flush(include_open=include_open).summary())
        except LockBusy as exc:
            raise CommandError(str(exc)) from exc
