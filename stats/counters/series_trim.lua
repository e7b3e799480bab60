-- Trim a series counter's samples older than its retention (stats/counters/series.py).
-- KEYS: the counter's hash, its partition's index of counters. ARGV: the oldest sample to keep, the counter's
-- index member. A counter left empty leaves the index.
local removed = 0
for _, sample in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(sample) < tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[1], sample)
    removed = removed + 1
  end
end
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[2]) end
return removed
