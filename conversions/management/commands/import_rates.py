from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from conversions.rates import RateImportError, rates_import_csv


class Command(BaseCommand):
    help = "Import exchange rates from a CSV file with the header currency,valid_from,rate (all or nothing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(self, *args: object, file: Path, **options: object) -> None:
        try:
            text = file.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        try:
            result = rates_import_csv(text=text)
        except RateImportError as exc:
            for error in exc.errors:
                self.stderr.write(error)
            raise CommandError(f"{file}: {exc}") from exc
        self.stdout.write(
            f"imported {result.added} exchange rates from {file} ({result.unchanged} already there)"
        )
