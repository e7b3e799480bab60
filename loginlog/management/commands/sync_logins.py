from django.core.management.base import BaseCommand, no_translations

from cpsproject.common.locks import command_errors
from loginlog.services import sync_logins


class Command(BaseCommand):
    help = (
        "Sync login bitmaps to LoginMonth and expire Redis login keys past retention (the weekly job), now."
    )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, **options: object) -> None:
        with command_errors():
            self.stdout.write(sync_logins().summary())
