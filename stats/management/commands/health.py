import sys

from django.core.management.base import BaseCommand

from stats.read.health import health_problems


class Command(BaseCommand):
    # A plain string: argparse formats the help before any translation is active, and a lazy one crashes it.
    help = (
        "Check consumer lag, the last flush, yesterday's reconcile and today's dead letters: print ok and exit "
        "0, or print one line per problem (a service out of reach included) and exit 1."
    )

    def handle(self, *args, **options) -> None:
        problems = health_problems()
        if not problems:
            self.stdout.write("ok")
            return
        for problem in problems:
            self.stdout.write(problem)
        sys.exit(1)
