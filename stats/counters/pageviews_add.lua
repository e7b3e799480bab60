-- Add a batch's page views to the PV buckets of one Kafka partition (stats/counters/pageviews.py).
-- KEYS: the bucket hashes, then the partition's bucket index. ARGV: the batch's generation, the safety TTL,
-- then per bucket its index score (yyyyMMddHHmm) and its tree, self and bot increments, one space-separated
-- string: values stay text (a Lua number would be formatted back with printf's %.17g for redis.call, and a
-- JSON of numbers costs a strtod each). A bucket the script creates gets its generation, TTL and index entry
-- once; later batches only increment it (flush deletes key and entry together).
local index = KEYS[#KEYS]
local generation, ttl = ARGV[1], ARGV[2]
local i = 1
for stamp, tree, own, bot in string.gmatch(ARGV[3], '(%d+) (%d+) (%d+) (%d+)') do
  local key = KEYS[i]
  if tree ~= '0' then redis.call('HINCRBY', key, 'tree', tree) end
  if own ~= '0' then redis.call('HINCRBY', key, 'self', own) end
  if bot ~= '0' then redis.call('HINCRBY', key, 'bot', bot) end
  if redis.call('HSETNX', key, 'gen', generation) == 1 then
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', index, stamp, key)
  end
  i = i + 1
end
redis.call('EXPIRE', index, ttl)
return i - 1
