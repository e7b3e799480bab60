from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations
from django.core.management.commands import flush as django_flush
from django.db import DatabaseError
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

from cpsproject.common.locks import command_errors
from stats.jobs.flush import flush

# Options Django's own `flush` (empty the database) is called with by its test machinery.
DJANGO_FLUSH_OPTIONS = ("database", "interactive", "reset_sequences", "allow_cascade", "inhibit_post_migrate")


class Command(BaseCommand):
    help = "Flush settled PV buckets and UV counts from Redis to the SQL tables now."
    # The contract names this command `flush`, which shadows Django's database-emptying command of the same
    # name. TransactionTestCase still calls that one programmatically, with these options: hand it over.
    stealth_options = DJANGO_FLUSH_OPTIONS

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--include-open", action="store_true", help="also write buckets that are still open"
        )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, include_open: bool = False, **options: object) -> None:
        if any(name in options for name in DJANGO_FLUSH_OPTIONS):
            defaults = {"database": "default", "interactive": False, "reset_sequences": True}
            defaults |= {"allow_cascade": False, "inhibit_post_migrate": False}
            # OutputWrapper is a text stream (its stub type says otherwise).
            command = django_flush.Command(stdout=self.stdout, stderr=self.stderr)  # type: ignore[arg-type]
            return command.handle(**{**defaults, **options})
        with command_errors():
            try:
                result = flush(include_open=include_open)
            except DatabaseError as exc:
                # A Redis key is deleted only after the SQL transaction holding its value committed, so a
                # database outage loses nothing: say so in one line, and let the next run write it all.
                raise CommandError(
                    _("flush failed, the database is unavailable; Redis keeps every bucket: %(error)s")
                    % {"error": _one_line(exc)}
                ) from exc
            except RedisError as exc:
                raise CommandError(
                    _("flush failed, Redis is unavailable: %(error)s") % {"error": _one_line(exc)}
                ) from exc
        self.stdout.write(result.summary())


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
