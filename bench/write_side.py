"""Benchmarks of the write side: consume through the broker, its stages, the design document's pattern,
the consumer's memory, flush and reconcile.
"""

import datetime as dt
import logging
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import (
    PYTHON,
    ROOT,
    BenchError,
    CommittedOffsets,
    Environment,
    Row,
    Timer,
    cpu_seconds,
    holds_partitions,
    peak_rss_mb,
    progress_slope,
    redis_command_shares,
    redis_reference_us,
    steady_window,
)

log = logging.getLogger("bench.write")

FETCH_BYTES = 4 * 1024 * 1024  # the consumer's max_partition_fetch_bytes: the baseline fetches the same way


def _chunks(items, size):
    for start in range(0, len(items), size):
        yield start, items[start : start + size]


def _traffic(sizes) -> str:
    if sizes.consume_rate:
        return f"timestamps rising at {sizes.consume_rate:,.0f}/s up to now"
    return "timestamps at random moments of today"


# --- Consume through the broker -----------------------------------------------------------------------


def produce(
    env: Environment, *, events: int, users: int, rate: float, partitions: int = 3, orders_share: float = 0
) -> tuple[str, dt.date]:
    """A fresh topic holding ``events`` messages from ``manage.py simulate``; return it and their day.

    With ``rate``, timestamps rise at ``rate`` events/s and end now (``simulate --rate``); else they are random
    moments of today.
    """
    import common

    topic = env.create_topic(partitions)
    day = common.today()
    log.info("producing %s events to topic %s (manage.py simulate --to kafka)", f"{events:,}", topic)
    with Timer() as timer:
        env.manage(
            "simulate",
            "--events",
            str(events),
            "--users",
            str(users),
            "--date",
            day.isoformat(),
            "--to",
            "kafka",
            *(["--rate", str(rate)] if rate else []),
            *(["--orders-share", str(orders_share)] if orders_share else []),
            timeout=300 + events / 1000,
            env=env.child_env(KAFKA_TOPIC=topic, LOG_LEVEL="INFO"),
        )
    log.info("produced %s events in %.1f s", f"{events:,}", timer.seconds)
    return topic, day


def bare_fetch_rate(env: Environment, *, topic: str, events: int, batch: int) -> float:
    """Events/s of a kafka-python consumer that only polls the topic (same fetch settings, no processing)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=env.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=batch,
        max_partition_fetch_bytes=FETCH_BYTES,
    )
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        samples = [(time.monotonic(), 0)]
        done = 0
        deadline = time.monotonic() + 60 + events / 5000
        while done < events:
            polled = consumer.poll(timeout_ms=500, max_records=batch)
            got = sum(len(records) for records in polled.values())
            if got:
                done += got
                samples.append((time.monotonic(), done))
            if time.monotonic() > deadline:
                raise BenchError(f"the bare consumer read only {done} of {events} events before its deadline")
    finally:
        consumer.close()
    rate = progress_slope(samples, events)
    log.info("bare fetch: %s events/s", f"{rate:,.0f}")
    return rate


def _cpu_per_event(samples, cpu_samples, total: int, *, whole_group_from: int | None) -> dict[str, float]:
    """µs of CPU per event of each process over the window the rate is read from (``steady_window``)."""
    first, last = steady_window(samples, total, whole_group_from=whole_group_from)
    events = samples[last][1] - samples[first][1]
    return {
        name: (cpu_samples[last][name] - cpu_samples[first][name]) * 1e6 / events
        for name in cpu_samples[first]
        if cpu_samples[first][name] is not None and cpu_samples[last].get(name) is not None
    }


def run_consume(
    env: Environment,
    *,
    topic: str,
    events: int,
    batch: int,
    idle_exit: float,
    profile: Path | None,
    processes: int,
    stage: str = "live",
) -> tuple[float, float, dict[str, float]]:
    """Run one ``manage.py consume --processes N`` over the topic; return (steady events/s from committed
    offsets, peak RSS MB of its largest process, µs of CPU per event of each consume process and of each local
    service). Its counters go under the Redis prefix of ``stage``.

    The rate is the slope of the group's committed offsets between 20% and 90% of the topic, from the moment
    every member holds partitions, so the group's joins and the idle exit are left out; the CPU is read over
    the same window. Peak RSS is the process's
    high-water mark (VmHWM) at its last sample. Not its rusage at exit: Linux keeps a process's ``ru_maxrss``
    across ``exec``, so it includes the forked copy of this runner, whose resident set is the larger one once
    it has simulated a topic's events in-process.
    """

    group = f"bench-{uuid.uuid4().hex[:8]}"
    args = [
        str(ROOT / "manage.py"),
        "consume",
        "--exit-when-idle",
        str(idle_exit),
        "--batch-size",
        str(batch),
        "--processes",
        str(processes),
    ]
    if profile:
        session = profile / f"consume-{stage}.pyisession"
        command = [PYTHON, "-m", "pyinstrument", "-r", "pyisession", "-o", str(session), *args]
    else:
        command = [PYTHON, *args]
    child = env.spawn(
        "consume",
        command,
        env=env.child_env(
            KAFKA_TOPIC=topic, KAFKA_GROUP_ID=group, CPS_REDIS_PREFIX=env.prefix(stage), LOG_LEVEL="INFO"
        ),
    )
    pid = child.process.pid
    committed = CommittedOffsets(env.bootstrap, topic=topic, group=group, partitions=3)

    members = {"consume": pid} if processes == 1 else _members(child, processes)
    watched = {**members, **env.service_pids()}

    def cpu_now() -> dict[str, float | None]:
        return {name: cpu_seconds(process) for name, process in watched.items()}

    def group_whole() -> bool:
        # A member's lines reach the supervisor's log as "[n] ..."; a single process's as they are.
        text = child.log_path.read_text(errors="replace")
        if processes == 1:
            return holds_partitions(text)
        lines = text.splitlines()
        return all(
            holds_partitions("\n".join(line for line in lines if line.startswith(f"[{n}] ")))
            for n in range(1, processes + 1)
        )

    samples = [(time.monotonic(), 0)]
    cpu_samples = [cpu_now()]
    joined: int | None = None  # the first sample taken with every member holding partitions
    peak = 0.0
    deadline = time.monotonic() + 120 + events / 1000
    next_log = time.monotonic() + 10
    try:
        while True:
            waited, status, _ = os.wait4(pid, os.WNOHANG)
            if waited:
                child.process.returncode = os.waitstatus_to_exitcode(status)
                break
            peak = max(peak, *(peak_rss_mb(member) or 0 for member in members.values()))
            if joined is None and group_whole():
                joined = len(samples)
            done = committed()
            if done is not None:
                samples.append((time.monotonic(), done))
                cpu_samples.append(cpu_now())
            if time.monotonic() > next_log:
                log.info(
                    "consume: %s/%s events committed, RSS peak %.0f MB",
                    f"{samples[-1][1]:,}",
                    f"{events:,}",
                    peak,
                )
                next_log += 10
            if time.monotonic() > deadline:
                child.stop()
                raise BenchError(f"consume did not drain {events} events in time:\n{child.tail()}")
            time.sleep(0.2)
        done = committed()
        if done is not None:
            samples.append((time.monotonic(), done))
            cpu_samples.append({name: None for name in watched})  # consume has exited
    finally:
        committed.close()
    if child.process.returncode != 0:
        raise BenchError(f"consume exited {child.process.returncode}:\n{child.tail()}")
    if samples[-1][1] < events:
        raise BenchError(
            f"consume exited with {samples[-1][1]} of {events} offsets committed:\n{child.tail()}"
        )
    rate = progress_slope(samples, events, whole_group_from=joined)
    log.info(
        "consume: %s events/s steady, peak RSS %.0f MB (%s)", f"{rate:,.0f}", peak, child.tail(1).strip()
    )
    if profile:
        _render_profile(session)
    return rate, peak, _cpu_per_event(samples, cpu_samples, events, whole_group_from=joined)


def _members(supervisor, count: int) -> dict[str, int]:
    """The pids of ``consume --processes``'s members, from the line its supervisor starts with."""
    deadline = time.monotonic() + 60
    while not (started := re.search(r"started \d+ consumers: (.*)", supervisor.log_path.read_text())):
        if time.monotonic() > deadline or supervisor.process.poll() is not None:
            raise BenchError(f"consume --processes {count} named no members:\n{supervisor.tail()}")
        time.sleep(0.1)
    return {f"consume {n}": int(pid) for n, pid in re.findall(r"(\d+) \(pid (\d+)\)", started.group(1))}


def _render_profile(session: Path) -> None:
    import subprocess

    for renderer, suffix in (("text", "txt"), ("html", "html")):
        out = session.with_suffix(f".{suffix}")
        subprocess.run(
            [PYTHON, "-m", "pyinstrument", "--load", str(session), "-r", renderer, "-o", str(out)], check=True
        )
        log.info("profile of consume: %s", out)


def consume_rows(env: Environment, sizes, *, profile: Path | None) -> tuple[list[Row], dt.date]:
    topic, day = produce(env, events=sizes.consume_events, users=sizes.users, rate=sizes.consume_rate)
    bare = bare_fetch_rate(env, topic=topic, events=sizes.consume_events, batch=sizes.batch)
    if not hasattr(env.redis(), "get_node_from_key"):  # one server: the commands of the consume alone
        env.redis().config_resetstat()
    rate, peak, cpu = run_consume(
        env,
        topic=topic,
        events=sizes.consume_events,
        batch=sizes.batch,
        idle_exit=sizes.idle_exit,
        profile=profile,
        processes=sizes.consume_processes,
    )
    commands = redis_command_shares(env.redis(), sizes.consume_events)
    reference = redis_reference_us(env.redis(), prefix=env.prefix("reference"))
    archive = "MariaDB" if env.is_mysql else "SQLite"
    budget = (os.cpu_count() or 1) * 1e6 / 30_000
    spent = (
        "; CPU per event: "
        + ", ".join(f"{name} {us:.1f} µs" for name, us in cpu.items())
        + f" ({sum(cpu.values()):.0f} µs in all; {os.cpu_count()} cores allow {budget:.0f} µs at 30,000/s)"
        if cpu
        else ""
    )
    size = (
        f"{sizes.consume_events:,} events, 3 partitions, --batch-size {sizes.batch}, "
        f"--processes {sizes.consume_processes}, SQL archive on {archive}, " + _traffic(sizes)
    )
    rows = [
        Row(
            "consume via broker",
            rate,
            "events/s",
            target="≥ 30,000/s and ≥ 0.5× bare fetch",
            baseline=bare,
            note=f"{size}; baseline: bare kafka-python poll of the same topic{spent}"
            + ("; PROFILED (pyinstrument), not comparable" if profile else ""),
        ),
        Row(
            "consume peak RSS",
            peak,
            "MB",
            target="< 200 MB",
            note=f"the largest of consume's {sizes.consume_processes} process(es) over {sizes.consume_events:,} "
            "events (each member holds its own batches in flight)",
        ),
        Row(
            "Redis CPU per event",
            cpu.get("Redis"),
            "µs",
            # Issue 35: at most 2 µs for the page-view counters and at most 1 µs more for traffic quality and
            # conversions; this run has every one of them on (bench/counter_cost.py measures each apart).
            target="≤ 3 µs (2 + 1)",
            note="the Redis server process's CPU time (user and system) over the consume row's run, divided by its "
            "events: every counter (page views, traffic quality) and the attribution views, against at most 2 µs "
            "for the page-view counters and 1 µs more for quality and conversions"
            + (f"; per event, the busiest commands: {commands}" if commands else ""),
        ),
    ]
    redis_us = cpu.get("Redis")
    rows.append(
        Row(
            "Redis CPU, reference HINCRBYs",
            redis_us / reference if redis_us is not None and reference else None,
            "per event",
            note=f"the row above in units of this machine's reference: a plain HINCRBY in a MULTI/EXEC cost Redis "
            f"{reference or 0:.3f} µs in this run (bench/harness.py, REFERENCE_COMMANDS): a figure that compares "
            "across machines of different speed",
        )
    )
    rows[0].met = rate >= 30_000 and rows[0].ratio is not None and rows[0].ratio >= 0.5
    rows[1].met = peak < 200
    rows[2].met = rows[2].value is not None and rows[2].value <= 3
    return rows, day


# --- Consume with orders: attribution remembers every partner view --------------------------------------

ORDERS_SHARE = 0.05


def orders_rows(env: Environment, sizes, *, profile: Path | None) -> list[Row]:
    """Consume a topic where 5% of the events are orders (``simulate --orders-share``), every partner view
    remembered for attribution; then the Redis bytes those views take per remembered buyer."""
    import common

    env.manage("import_rates", str(ROOT / "sample" / "rates.csv"), timeout=120)
    topic, _ = produce(
        env,
        events=sizes.consume_events,
        users=sizes.users,
        rate=sizes.consume_rate,
        orders_share=ORDERS_SHARE,
    )
    bare = bare_fetch_rate(env, topic=topic, events=sizes.consume_events, batch=sizes.batch)
    rate, peak, cpu = run_consume(
        env,
        topic=topic,
        events=sizes.consume_events,
        batch=sizes.batch,
        idle_exit=sizes.idle_exit,
        profile=profile,
        processes=sizes.consume_processes,
        stage="orders",
    )
    spent = ", ".join(f"{name} {us:.1f} µs" for name, us in cpu.items())
    row = Row(
        "consume with 5% orders",
        rate,
        "events/s",
        target="≥ 0.5× bare fetch",
        baseline=bare,
        note=f"{sizes.consume_events:,} messages ({ORDERS_SHARE:.0%} orders with their buyers' views, "
        f"every partner view remembered), 3 partitions, --batch-size {sizes.batch}, "
        f"--processes {sizes.consume_processes}, {_traffic(sizes)}; "
        f"baseline: bare fetch of the same topic; CPU per event: {spent}; consume peak RSS {peak:.0f} MB (its largest process)"
        + ("; PROFILED (pyinstrument), not comparable" if profile else ""),
    )
    row.met = row.ratio is not None and row.ratio >= 0.5
    used, buyers, fields = common.view_memory(env.prefix("orders"))
    memory = Row(
        "Redis bytes per remembered buyer",
        used / buyers if buyers else None,
        "bytes",
        note=f"MEMORY USAGE of the views hashes after the row above / the {buyers:,} buyers they remember "
        f"({fields:,} buyer-partition fields, {used / 1e6:.1f} MB)",
    )
    return [row, memory]


# --- Consume per codec: topics produced by librdkafka ---------------------------------------------------

# Kafka's codecs as librdkafka names them (``compression.type``), each with the figure of its row.
CODECS = {
    "none": "consume, uncompressed topic",
    "gzip": "consume, gzip topic",
    "snappy": "consume, snappy topic",
    "lz4": "consume, lz4 topic",
    "zstd": "consume, zstd topic",
}
# The codecs whose row must reach half the bare fetch (issue 24): the uncompressed topic and the two codecs
# producers pick for speed. gzip and snappy are measured and reported alongside.
CODEC_TARGETS = {"none", "lz4", "zstd"}


def produce_librdkafka(env: Environment, *, values: list[bytes], codec: str, partitions: int = 3) -> str:
    """A fresh topic holding ``values``, sent by librdkafka (``confluent-kafka``) with ``codec``; return it.

    The producer is configured as a backend's usually is: idempotent, ``acks=all``, no key (librdkafka spreads
    the records over the partitions), a linger of 20 ms so that each record batch holds many records and the
    codec compresses whole batches.
    """
    from confluent_kafka import Producer

    topic = env.create_topic(partitions)
    failed: list[object] = []

    def delivered(error, message) -> None:
        if error is not None:
            failed.append(error)

    producer = Producer(
        {
            "bootstrap.servers": env.bootstrap,
            "compression.type": codec,
            "enable.idempotence": True,
            "linger.ms": 20,
            "log.connection.close": False,
        }
    )
    with Timer() as timer:
        for value in values:
            while True:
                try:
                    producer.produce(topic, value=value, on_delivery=delivered)
                    break
                except BufferError:  # librdkafka's queue is full: let it send, then queue again
                    producer.poll(0.05)
        if producer.flush(120) != 0:
            raise BenchError(f"librdkafka did not deliver every event to {topic} within 120 s")
    if failed:
        raise BenchError(f"librdkafka failed to deliver {len(failed)} events to {topic}: {failed[0]}")
    log.info("produced %s events to %s (%s) in %.1f s", f"{len(values):,}", topic, codec, timer.seconds)
    return topic


def codec_rows(env: Environment, sizes) -> list[Row]:
    """``manage.py consume`` over a topic per codec against the bare fetch of the same topic, in one run.

    Every topic is produced first; then each is read by the bare fetch and by ``consume``, one topic after
    the other. The quick run reads the five at once: it times nothing, and five group joins one after the
    other (each a few seconds on tansu) would make up most of it.
    """
    import common

    topics = {}
    for seed, codec in enumerate(CODECS, start=31):
        # Other events for each topic (their own ids), so the archive keeps every one of them.
        values = common.simulate_values(
            events=sizes.codec_events, seed=seed, users=sizes.users, rate=sizes.consume_rate or None
        )
        topics[codec] = produce_librdkafka(env, values=values, codec=codec)
        del values
    with ThreadPoolExecutor(max_workers=len(topics) if env.quick else 1) as pool:
        return list(pool.map(lambda codec: _codec_row(env, sizes, codec, topics[codec]), topics))


def _codec_row(env: Environment, sizes, codec: str, topic: str) -> Row:
    figure = CODECS[codec]
    bare = bare_fetch_rate(env, topic=topic, events=sizes.codec_events, batch=sizes.batch)
    rate, _, cpu = run_consume(
        env,
        topic=topic,
        events=sizes.codec_events,
        batch=sizes.batch,
        idle_exit=sizes.idle_exit,
        profile=None,
        processes=sizes.consume_processes,
        stage=f"codec-{codec}",
    )
    log.info("%s: %s events/s, %.2f× the bare fetch", figure, f"{rate:,.0f}", rate / bare)
    row = Row(
        figure,
        rate,
        "events/s",
        target="≥ 0.5× bare fetch" if codec in CODEC_TARGETS else "—",
        baseline=bare,
        note=f"{sizes.codec_events:,} events sent by librdkafka (compression.type={codec}, idempotent, "
        f"linger 20 ms), 3 partitions, --batch-size {sizes.batch}, --processes {sizes.consume_processes}, "
        f"{_traffic(sizes)}; baseline: bare "
        f"kafka-python poll of the same topic; CPU per event: "
        + ", ".join(f"{name} {us:.1f} µs" for name, us in cpu.items()),
    )
    if codec in CODEC_TARGETS:
        row.met = row.ratio is not None and row.ratio >= 0.5
    return row


# --- Stages, in-process -------------------------------------------------------------------------------


def stage_rows(env: Environment, sizes) -> list[Row]:
    """The archive stage and the counting stage timed apart, in-process, on the same events."""
    import common

    log.info("stages: simulating %s events in-process", f"{sizes.stage_events:,}")
    values = common.simulate_values(
        events=sizes.stage_events, seed=21, users=sizes.users, rate=sizes.consume_rate or None
    )
    ingest = common.Ingest()
    counting = archiving = 0.0
    with common.redis_prefix(env.prefix("stages")):
        for start, chunk in _chunks(values, sizes.batch):
            with Timer() as timer:
                ingest.count(chunk, partition=start // sizes.batch % 3)
            counting += timer.seconds
            if start and start % 50_000 < sizes.batch:
                log.info("counting stage: %s/%s", f"{start:,}", f"{len(values):,}")
        for start, chunk in _chunks(values, sizes.batch):
            events = ingest.parse(chunk)
            with Timer() as timer:
                ingest.archive(events)
            archiving += timer.seconds
            if start and start % 50_000 < sizes.batch:
                log.info("archive stage: %s/%s", f"{start:,}", f"{len(values):,}")
    note = (
        f"{len(values):,} messages in batches of {sizes.batch}, in-process, {_traffic(sizes)}; "
        "rate = messages / stage time"
    )
    log.info(
        "archive stage %.0f events/s, counting stage %.0f events/s",
        len(values) / archiving,
        len(values) / counting,
    )
    return [
        Row("consume: archive stage", len(values) / archiving, "events/s", note=note + " (SQL archive)"),
        Row(
            "consume: counting stage",
            len(values) / counting,
            "events/s",
            note=note + " (parse + aggregate + MULTI/EXEC)",
        ),
    ]


def design_doc_rows(env: Environment, sizes) -> list[Row]:
    """The pipeline (``process_batch``) against the first design document's per-event pattern."""
    import common

    values = common.simulate_values(
        events=sizes.pipeline_events, seed=22, users=sizes.users, rate=sizes.consume_rate or None
    )
    ingest = common.Ingest()
    with common.redis_prefix(env.prefix("pipeline")), Timer() as pipeline:
        for start, chunk in _chunks(values, sizes.batch):
            ingest.process(chunk, first_offset=start, partition=start // sizes.batch % 3)
    pipeline_rate = len(values) / pipeline.seconds
    log.info("pipeline in-process: %.0f events/s", pipeline_rate)

    doc_values = common.simulate_values(
        events=sizes.doc1_events, seed=23, users=sizes.users, rate=sizes.consume_rate or None
    )
    done = 0
    with common.redis_prefix(env.prefix("doc1")), Timer() as doc:
        for _, chunk in _chunks(doc_values, 250):
            ingest.design_doc_events(chunk)
            done += len(chunk)
            if time.perf_counter() - doc.start > sizes.doc1_seconds:
                break
    doc_rate = done / doc.seconds
    log.info("design document pattern: %.0f events/s over %d events", doc_rate, done)
    row = Row(
        "pipeline vs design doc 1",
        pipeline_rate,
        "events/s",
        target="≥ 10× baseline",
        baseline=doc_rate,
        note=f"pipeline: process_batch in-process (archive in its worker thread, as consume runs it), "
        f"{len(values):,} messages, {_traffic(sizes)}; baseline: per event one archive "
        f"INSERT + INCR + ZADD + PFADD round trip each (one commit per 250), {done:,} messages",
    )
    row.met = row.ratio is not None and row.ratio >= 10
    return [row]


# --- Reconcile, flush ---------------------------------------------------------------------------------


def reconcile_rows(env: Environment, sizes, *, day: dt.date) -> list[Row]:
    import common

    raw = common.raw_event_count(day)
    if not raw:  # run without the consume benchmark (--only reconcile): archive the same traffic in-process
        log.info("reconcile: archiving %s simulated events of %s first", f"{sizes.consume_events:,}", day)
        raw = common.archive_simulated(
            day=day, events=sizes.consume_events, users=sizes.users, batch=sizes.batch
        )
    log.info("reconcile %s over %s raw events (manage.py reconcile)", day, f"{raw:,}")
    with Timer() as timer:
        env.manage(
            "reconcile",
            "--date",
            day.isoformat(),
            timeout=900,
            env=env.child_env(CPS_REDIS_PREFIX=env.prefix("live")),
        )
    log.info("reconcile: %.1f s", timer.seconds)
    row = Row(
        "reconcile a day",
        timer.seconds,
        "s",
        target="< 60 s",
        note=f"{raw:,} raw events, {sizes.partners:,} partners, SQL archive; wall time of manage.py reconcile "
        "(includes ~1 s of start-up)",
    )
    row.met = timer.seconds < 60
    return [row]


def flush_rows(env: Environment, sizes) -> list[Row]:
    import common

    day = common.today() - dt.timedelta(days=2)
    with common.redis_prefix(env.prefix("flush")):
        dirty = common.queue_dirty_buckets(day=day, buckets=sizes.flush_buckets)
        log.info("flush: %s dirty partner-buckets of %s; baseline first (rolled back)", f"{dirty:,}", day)
        done, total, seconds = common.flush_row_by_row(budget_seconds=sizes.flush_baseline_seconds)
        baseline = seconds * total / done if done else None
        log.info("flush baseline: %d of %d buckets in %.1f s", done, total, seconds)
        with Timer() as timer:
            buckets, days = common.flush()
        left = common.dirty_bucket_count()
    log.info(
        "flush: %d bucket rows, %d partner-days in %.2f s (%d keys left)", buckets, days, timer.seconds, left
    )
    if buckets != dirty:
        raise BenchError(f"flush wrote {buckets} bucket rows for {dirty} dirty buckets")
    extrapolated = "" if done == total else f" (timed {done:,} of them, extrapolated)"
    row = Row(
        "flush dirty buckets",
        timer.seconds,
        "s",
        target="< 5 s",
        baseline=baseline,
        note=f"{dirty:,} dirty partner-buckets (+ {days:,} partner-days, their HyperLogLogs) to "
        f"{'MariaDB' if env.is_mysql else 'SQLite'}; baseline: per bucket HGETALL + UPDATE pv = pv + n{extrapolated}",
    )
    row.met = timer.seconds < 5
    return [row]
