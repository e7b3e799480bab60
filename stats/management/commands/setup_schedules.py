from django.core.management.base import BaseCommand

from cpsproject.common.schedules import setup_schedules


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules (flush, windows, reconcile, login sync). Idempotent."

    def handle(self, *args, **options) -> None:
        names = setup_schedules()
        self.stdout.write(f"{len(names)} schedules in place: {', '.join(names)}")
