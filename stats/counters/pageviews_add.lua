-- Add a batch's page views to the PV buckets of one Kafka partition (stats/counters/pageviews.py).
-- KEYS: the bucket hashes, then the partition's bucket index. ARGV: the batch's generation, the safety TTL,
-- then JSON: per bucket its index score (yyyyMMddHHmm) and its tree, self and bot increments. A bucket the
-- script creates gets its generation, TTL and index entry once; later batches only increment it (flush
-- deletes key and entry together).
local index = KEYS[#KEYS]
local generation, ttl = ARGV[1], ARGV[2]
local numbers = cjson.decode(ARGV[3])
for i = 1, #KEYS - 1 do
  local key, at = KEYS[i], 4 * i - 3
  if numbers[at + 1] ~= 0 then redis.call('HINCRBY', key, 'tree', numbers[at + 1]) end
  if numbers[at + 2] ~= 0 then redis.call('HINCRBY', key, 'self', numbers[at + 2]) end
  if numbers[at + 3] ~= 0 then redis.call('HINCRBY', key, 'bot', numbers[at + 3]) end
  if redis.call('HSETNX', key, 'gen', generation) == 1 then
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', index, numbers[at], key)
  end
end
redis.call('EXPIRE', index, ttl)
return #KEYS - 1
