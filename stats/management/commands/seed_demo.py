from django.core.management.base import BaseCommand

from stats.devtools.demo import DEMO_EVENTS, seed_demo


class Command(BaseCommand):
    help = "Load the sample partner tree, the demo superuser (demo/demo) and a day of synthetic traffic."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--events", type=int, default=DEMO_EVENTS, help="events of today's traffic")

    def handle(self, *args, **options) -> None:
        self.stdout.write(seed_demo(events=options["events"]))
