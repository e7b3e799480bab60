from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser, no_translations

from stats.conf import stats_setting
from stats.jobs.layout import upgrade_layout
from stats.pipeline.consumer import StopFlag, consume_file, consume_kafka, tune_garbage_collection
from stats.pipeline.supervisor import run_members


class Command(BaseCommand):
    help = "Consume events (Kafka consumer group, or a JSON-lines file) into the archive and Redis counters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=stats_setting("CONSUMER_BATCH_SIZE"))
        parser.add_argument(
            "--exit-when-idle",
            type=float,
            metavar="SECONDS",
            help="exit 0 after this long with no messages while holding partitions (drain the topic)",
        )
        parser.add_argument(
            "--source", default="kafka", help="kafka (default) or file:PATH to replay JSON lines"
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            metavar="N",
            help="run N members of the consumer group, each a process of its own (a core each; no more members "
            "than the topic has partitions count at once)",
        )

    @no_translations  # English whatever CPS_LANGUAGE_CODE says, like the exception texts and logs beside it
    def handle(
        self,
        *args: object,
        batch_size: int,
        exit_when_idle: float | None,
        source: str,
        processes: int,
        **options: object,
    ) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        if processes < 1:
            raise CommandError("--processes must be at least 1")
        if processes > 1 and source != "kafka":
            raise CommandError(
                "--processes runs members of a Kafka consumer group; a file is replayed by one process"
            )
        if source == "kafka" and not settings.KAFKA_BOOTSTRAP_SERVERS.strip():
            raise CommandError(
                "KAFKA_BOOTSTRAP_SERVERS is empty: this installation uses no Kafka; use --source file:PATH"
            )
        upgrade_layout()  # what an earlier version left in Redis moves before anything counts on top of it
        if processes > 1:
            arguments = ["--batch-size", str(batch_size)]
            if exit_when_idle is not None:
                arguments += ["--exit-when-idle", str(exit_when_idle)]
            failed = run_members(processes, arguments, out=self.stdout, err=self.stderr)
            if failed:
                raise CommandError(failed)
            return
        stop = StopFlag()
        stop.install()
        tune_garbage_collection()
        if source == "kafka":
            result = consume_kafka(batch_size=batch_size, exit_when_idle=exit_when_idle, stop=stop)
        elif source.startswith("file:"):
            path = Path(source.removeprefix("file:"))
            if not path.is_file():
                raise CommandError(f"--source {source}: no such file")
            result = consume_file(path, batch_size=batch_size, stop=stop)
        else:
            raise CommandError(f"--source must be kafka or file:PATH, not {source!r}")
        self.stdout.write(result.summary())
