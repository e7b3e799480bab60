"""``/metrics``: the pipeline's figures in the Prometheus text format, for staff or the metrics token.

The consumer, the django-q2 workers and the web server are separate processes, so the collector keeps no
counters of its own: each scrape reads the durable state that ``stats.read.pipeline_status`` reads (Redis
hashes the consumer and the jobs write, Kafka end offsets as last seen, SQL); nothing asks Kafka.
"""

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from cpsproject.common import jobruns
from cpsproject.common.timeutil import epoch
from stats.dashboard.site import can_read_statistics
from stats.pipeline import metrics
from stats.read import pipeline_status
from stats.read.metric_sources import extra_metrics


class PipelineCollector:
    """A prometheus-client collector that reads the pipeline's durable state at scrape time."""

    def collect(self) -> Iterator[Metric]:
        yield from self._counts()
        yield from self._kafka()
        yield from self._consumers()
        yield from self._jobs()
        yield from extra_metrics()  # what other apps add (stats.plugins.register_metrics)

    def _counts(self) -> Iterator[Metric]:
        """Events counted, dead letters counted, and how long batches take."""
        counted = metrics.counted_events()
        total = CounterMetricFamily("cps_events_counted", "Events counted by the consumers.")
        total.add_metric([], sum(counted.values()))
        yield total
        by_source = CounterMetricFamily(
            "cps_events_counted_by_source",
            "Events counted by the consumers, by event type and source (Kafka topic or replay file).",
            labels=["type", "source"],
        )
        for (event_type, source), n in sorted(counted.items()):
            by_source.add_metric([event_type, source], n)
        yield by_source

        dead = CounterMetricFamily(
            "cps_dead_letters",
            "Events the consumers set aside as dead letters, by reason.",
            labels=["reason"],
        )
        for reason, n in pipeline_status.dead_letters_counted().items():
            dead.add_metric([reason], n)
        yield dead

        histogram = metrics.batch_histogram()
        yield HistogramMetricFamily(
            "cps_batch_duration_seconds",
            "Time the consumer took to process one polled batch.",
            buckets=histogram.buckets,
            sum_value=histogram.sum,
        )

    def _kafka(self) -> Iterator[Metric]:
        """Each partition's lag and offsets, and the last lag probe."""
        # From what the consumers and the probe job last recorded: a scrape never waits on Kafka.
        lag = GaugeMetricFamily(
            "cps_consumer_lag",
            "Messages of a Kafka partition not counted yet (end offset as last seen minus the offset stored in "
            "Redis).",
            labels=["topic", "partition"],
        )
        seen = GaugeMetricFamily(
            "cps_kafka_end_offset_seen_timestamp_seconds",
            "When a partition's end offset (the base of cps_consumer_lag) was last seen, Unix time.",
            labels=["topic", "partition"],
        )
        offsets = GaugeMetricFamily(
            "cps_consumer_offset",
            "A Kafka partition's offset counted (stored in Redis with the counters) and its end offset as last seen.",
            labels=["topic", "partition", "offset"],
        )
        for row in pipeline_status.consumer_lag():
            # No stored offset: nothing of the partition has been counted yet.
            offsets.add_metric([settings.KAFKA_TOPIC, str(row.partition), "counted"], row.stored_offset or 0)
            # A lag is known once the end offset has been seen, with its moment.
            if row.lag is not None and row.end_offset is not None and row.seen_at is not None:
                lag.add_metric([settings.KAFKA_TOPIC, str(row.partition)], row.lag)
                seen.add_metric([settings.KAFKA_TOPIC, str(row.partition)], epoch(row.seen_at))
                offsets.add_metric([settings.KAFKA_TOPIC, str(row.partition), "end"], row.end_offset)
        yield lag
        yield seen
        yield offsets
        probe = pipeline_status.last_kafka_probe()
        if probe is not None:
            yield GaugeMetricFamily(
                "cps_kafka_up",
                "1 if Kafka answered the last lag probe (every minute).",
                value=int(not probe.error),
            )
            yield GaugeMetricFamily(
                "cps_kafka_probe_timestamp_seconds",
                "When the last lag probe ran, Unix time.",
                value=epoch(probe.at),
            )

    def _consumers(self) -> Iterator[Metric]:
        unassigned = GaugeMetricFamily(
            "cps_consumer_unassigned_seconds",
            "How long a running consumer has held no partition (0 while it holds some).",
            labels=["member"],
        )
        for member, seconds in sorted(pipeline_status.consumers_without_partitions().items()):
            unassigned.add_metric([member], seconds)
        yield unassigned

    def _jobs(self) -> Iterator[Metric]:
        """The scheduled jobs' last runs, and what waits for the next flush."""
        runs = jobruns.all_runs()
        last_success = GaugeMetricFamily(
            "cps_job_last_success_timestamp_seconds",
            "When a job (flush, reconcile, sync_logins, maintain_windows, purge) last succeeded, Unix time.",
            labels=["job"],
        )
        duration = GaugeMetricFamily(
            "cps_job_last_duration_seconds", "How long a job's last successful run took.", labels=["job"]
        )
        for name, (when, seconds) in sorted(runs.items()):
            last_success.add_metric([name], epoch(when))
            if seconds is not None:
                duration.add_metric([name], seconds)
        yield last_success
        yield duration

        yield GaugeMetricFamily(
            "cps_pending_flush_keys",
            "PV bucket and UV keys in Redis waiting for a flush.",
            value=pipeline_status.pending_flush_keys(),
        )


def _allowed(request: HttpRequest) -> bool:
    if request.user.is_authenticated and can_read_statistics(request.user):
        return True
    token = settings.CPS_METRICS_TOKEN
    scheme, _sep, sent = request.headers.get("Authorization", "").partition(" ")
    # compare_digest: a wrong token takes as long to refuse as an almost right one.
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip(), token)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Render the pipeline's metrics for staff (session) or ``Authorization: Bearer <CPS_METRICS_TOKEN>``."""
    if not _allowed(request):
        return HttpResponseForbidden(
            _("Metrics need a staff login or the metrics token (Authorization: Bearer …)."),
            content_type="text/plain; charset=utf-8",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
