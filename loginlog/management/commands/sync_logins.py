from django.core.management.base import BaseCommand, CommandError

from cpsproject.common.locks import LockBusy
from loginlog.services import sync_logins


class Command(BaseCommand):
    help = (
        "Sync login bitmaps to LoginMonth and expire Redis login keys past retention (the weekly job), now."
    )

    def handle(self, *args, **options) -> None:
        try:
            self.stdout.write(sync_logins().summary())
        except LockBusy as exc:
            raise CommandError(str(exc)) from exc
