"""Lua scripts kept as ``.lua`` files beside the module that owns the Redis structure they work on.

Every script is sent as ``EVAL`` with its source, never ``EVALSHA``: a script cache is per node, a replica that
a failover promotes starts with an empty one, and redis-py's cluster pipeline cannot load scripts. The sources
are a few hundred bytes, and Redis compiles each once. Queued on a pipeline (or on what records one, as the
consumer's counters do), a call is one more command of that pipeline.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

# The counter scripts turn a hash they grow past this many fields into a hashtable. Redis keeps a hash of up to
# hash-max-listpack-entries fields (512 by default) as a listpack, searched from its start by every HINCRBY,
# and a batch increments the newest field, at its end: in a consumer that had run for a quarter of an hour, the
# series' listpack searches were 63 % of its Redis instructions. Hashes that keep samples for hours pass 512
# fields and become hashtables anyway; below this many, a listpack search costs less than a hashtable lookup
# (bench/redis_cost.md). A script sets a field whose value is longer than hash-max-listpack-value (64 bytes by
# default; the scripts set 4 KB), which converts the hash, and deletes it in the same call: Redis never turns a
# hashtable back while it runs, and no reader sees the field. A hash loaded from RDB (a restart, a replica's
# sync, a slot migrated to another master) is a listpack again: the scripts check again each time a hash's
# length passes a further multiple of this (to_hashtable.lua, beside this file).
HASHTABLE_PAST_FIELDS = 64
# ``to_hashtable_if_due(key, new_fields)``, for the scripts that grow hashes: ``LuaScript(…, include=[…])``.
TO_HASHTABLE = (
    f"local HASHTABLE_PAST_FIELDS = {HASHTABLE_PAST_FIELDS}\n"
    + (Path(__file__).parent / "to_hashtable.lua").read_text()
)


class CommandTarget(Protocol):
    """A Redis client or pipeline, or anything else with redis-py's ``execute_command``."""

    def execute_command(self, *args: Any, **options: Any) -> Any: ...


class LuaScript:
    def __init__(self, module_file: str, name: str, *, include: Sequence[str] = ()) -> None:
        """The script ``name`` in the folder of ``module_file`` (pass ``__file__``), after the Lua sources of
        ``include`` (functions shared by several scripts, such as ``TO_HASHTABLE``)."""
        self.source = "".join(include) + (Path(module_file).parent / name).read_text()

    def queue(self, pipe: CommandTarget, keys: Sequence[Any], args: Sequence[Any] = ()) -> None:
        """Queue one call on ``pipe`` (a pipeline, or anything with redis-py's ``execute_command``)."""
        pipe.execute_command("EVAL", self.source, len(keys), *keys, *args)

    def __call__(self, client: CommandTarget, keys: Sequence[Any], args: Sequence[Any] = ()) -> Any:
        """Run one call now on ``client`` and return its reply."""
        return client.execute_command("EVAL", self.source, len(keys), *keys, *args)
