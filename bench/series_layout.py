"""What a 1-second series sample costs Redis in two layouts: the product's (a hash per counter, a HINCRBY per
(counter, second) from ``hincrby_many.lua``), against a string per counter and hour of 3,600 unsigned 32-bit
samples, one BITFIELD per counter and apply with an INCRBY per second (issue 35's next step, not built yet).

Both replay the same applies (1,000 counters, 10 new seconds each, 30 applies) from Lua, against the Redis of
``--port`` (a private server: ``INFO cpu`` is the whole server's; it is flushed). Prints Redis CPU per (counter,
second) pair and the memory the layout holds at the end. The hashes grow to 300 fields, listpacks up to Redis'
default 128 as the bench's young series hashes are (an hour-old 1-second hash is a hashtable, cheaper per
HINCRBY); the strings are 14.4 KB from the first sample of their hour, however sparse::

    redis-server --port 6391 --save '' --appendonly no --daemonize yes
    .venv/bin/python bench/series_layout.py --port 6391
"""

import argparse

import redis

COUNTERS, SECONDS, APPLIES = 1000, 10, 30
START = 1_795_692_000  # an epoch second on the hour's grid of neither layout: samples start mid-hour

HINCRBY_PAIRS = """
for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[tonumber(ARGV[i])], ARGV[i + 1], 1) end
"""
BITFIELD_PER_COUNTER = """
local at = 1
for k = 1, #KEYS do
  local n, ops = tonumber(ARGV[at]), {}
  for j = 1, n do
    ops[#ops + 1] = 'INCRBY'; ops[#ops + 1] = 'u32'; ops[#ops + 1] = ARGV[at + j]; ops[#ops + 1] = 1
  end
  redis.call('BITFIELD', KEYS[k], unpack(ops))
  at = at + n + 1
end
"""


def _redis_cpu(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def _replay(client: redis.Redis, layout: str) -> tuple[float, int]:
    """Redis CPU seconds for the applies in ``layout``, and the memory used at the end."""
    hincrby = client.register_script(HINCRBY_PAIRS)
    bitfield = client.register_script(BITFIELD_PER_COUNTER)
    client.flushall()
    began = _redis_cpu(client)
    for apply in range(APPLIES):
        seconds = [START + apply * SECONDS + s for s in range(SECONDS)]
        args: list[int | str] = []
        if layout == "hash":
            for number in range(1, COUNTERS + 1):
                for second in seconds:
                    args += [number, second]
            hincrby(keys=[f"{{p0}}:series:1:{c}" for c in range(COUNTERS)], args=args)
        else:
            for _ in range(COUNTERS):
                args += [SECONDS, *(f"#{second % 3600}" for second in seconds)]
            bitfield(keys=[f"{{p0}}:series:1:{c}:{START // 3600}" for c in range(COUNTERS)], args=args)
    return _redis_cpu(client) - began, client.info("memory")["used_memory"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6391)
    parser.add_argument("--rounds", type=int, default=2, help="each layout this many times, interleaved")
    args = parser.parse_args()
    client = redis.Redis(port=args.port)
    pairs = COUNTERS * SECONDS * APPLIES
    for round_number in range(1, args.rounds + 1):
        for layout in ("hash", "bitfield"):
            spent, memory = _replay(client, layout)
            print(
                f"round {round_number} {layout:8s}: {spent / pairs * 1e6:.2f} µs of Redis CPU a (counter, second), "
                f"{memory / 1e6:.1f} MB used"
            )
    client.flushall()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
