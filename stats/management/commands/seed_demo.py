from django.core.management.base import BaseCommand

from stats.devtools.demo import seed_demo


class Command(BaseCommand):
    help = "Load the sample partner tree, the demo superuser (demo/demo) and a day of synthetic traffic."

    def handle(self, *args, **options) -> None:
        self.stdout.write(seed_demo())
