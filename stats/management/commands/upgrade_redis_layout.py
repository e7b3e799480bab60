from django.core.management.base import BaseCommand, no_translations

from stats.jobs.layout import upgrade_layout


class Command(BaseCommand):
    help = (
        "Move the Redis keys an earlier version wrote to the current layout (consume and flush do it too). "
        "Stop every consumer of the earlier version first."
    )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, **options: object) -> None:
        moved = upgrade_layout()
        self.stdout.write(
            f"moved {moved} Redis keys to the current layout" if moved else "Redis layout is current"
        )
