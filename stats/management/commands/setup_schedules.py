from django.core.management.base import BaseCommand, no_translations

from cpsproject.common.schedules import setup_schedules


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules (flush, windows, reconcile, login sync). Idempotent."

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, **options: object) -> None:
        names = setup_schedules()
        self.stdout.write(f"{len(names)} schedules in place: {', '.join(names)}")
