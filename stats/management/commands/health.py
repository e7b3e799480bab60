import sys

from django.core.management.base import BaseCommand
from django.utils.translation import gettext_lazy as _

from stats.read.health import health_problems


class Command(BaseCommand):
    help = _(
        "Check consumer lag, the last flush, yesterday's reconcile and today's dead letters: print ok and exit "
        "0, or print one line per problem and exit 1."
    )

    def handle(self, *args, **options) -> None:
        problems = health_problems()
        if not problems:
            self.stdout.write("ok")
            return
        for problem in problems:
            self.stdout.write(problem)
        sys.exit(1)
