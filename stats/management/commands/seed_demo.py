from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser, no_translations

from stats.devtools.demo import DEMO_EVENTS, seed_demo


class Command(BaseCommand):
    help = (
        "Load the sample partner tree, the demo superuser (demo/demo) and a day of synthetic traffic when "
        "missing; print what was kept and what was loaded now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--events", type=int, default=DEMO_EVENTS, help="events of today's traffic")
        parser.add_argument("--files", type=Path, help="where the replay files go (default: .run/)")

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, events: int, files: Path | None, **options: object) -> None:
        for line in seed_demo(events=events, files=files):
            self.stdout.write(line)
