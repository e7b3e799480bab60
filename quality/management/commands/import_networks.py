from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from quality.networks import NetworkFileError, import_networks


class Command(BaseCommand):
    help = "Replace the listed networks (data centres, proxies) with a cidr,label CSV file, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV of cidr,label rows (a header line cidr,label is allowed)")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            with open(options["file"], encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        try:
            result = import_networks(text)
        except NetworkFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(result.summary())
