"""The one module of ``stats`` other apps may import: how a feature plugs into the ingest pipeline.

A feature registers, in its ``AppConfig.ready()``, the event type it parses and the counter it feeds::

    register_event_type("login", parse_login)      # parse(payload, envelope) -> event, or raise Rejected
    register_counter("logins", event_type="login", queue=queue_logins)   # queue(pipe, events, *, now)

The pipeline then parses, archives and dead-letters that type like any other, and queues the counter's Redis
commands in the same MULTI/EXEC as the Kafka offset, so the feature counts exactly once without knowing how.
"""

from stats.models import DeadLetter
from stats.pipeline.events import Rejected
from stats.pipeline.registry import Envelope, Event, register_counter, register_event_type

Reason = DeadLetter.Reason

__all__ = ["Envelope", "Event", "Reason", "Rejected", "register_counter", "register_event_type"]
