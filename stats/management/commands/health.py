import sys

from django.core.management.base import BaseCommand, no_translations

from stats.read.health import health_problems, kafka_in_use


class Command(BaseCommand):
    # A plain string: argparse formats the help before any translation is active, and a lazy one crashes it.
    help = (
        "Check consumer lag, the last flush, yesterday's reconcile and today's dead letters: print ok and exit "
        "0, or print one line per problem (a service out of reach included) and exit 1. With "
        "KAFKA_BOOTSTRAP_SERVERS empty (no Kafka, as in the demo), consumer lag is not checked."
    )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, **options: object) -> None:
        problems = health_problems()
        if not problems:
            self.stdout.write(
                "ok"
                if kafka_in_use()
                else "ok (no Kafka: KAFKA_BOOTSTRAP_SERVERS is empty; consumer lag not checked)"
            )
            return
        for problem in problems:
            self.stdout.write(problem)
        sys.exit(1)
