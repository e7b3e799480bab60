from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from partners.models import Partner
from partners.services import portal_token_issue


class Command(BaseCommand):
    help = "Create (or reuse) the portal user of a partner and print its API token (the last word)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("code")

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, code: str, **options: object) -> None:
        partner = Partner.objects.filter(code=code).first()
        if partner is None:
            raise CommandError(f"no partner with code {code!r}")
        self.stdout.write(f"portal token for {code}: {portal_token_issue(partner=partner)}")
