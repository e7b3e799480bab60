-- Many hash increments in one call (stats/counters/hincrby.py).
-- KEYS: the hashes, then an index of them (one hash tag). ARGV: JSON [ttl per hash], JSON [hash number,
-- field, amount, ...] (flat triples), JSON [the index member of each hash], the index's TTL, how far a hash's
-- TTL may run down before a write renews it. Only a hash in which an increment creates a field is looked at:
-- a new one gets its TTL and index entry; one whose TTL has run down that far gets both again.
local index = KEYS[#KEYS]
local ttls, triples, members = cjson.decode(ARGV[1]), cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
local run_down = tonumber(ARGV[5])
local created = {}
for i = 1, #triples, 3 do
  local amount = triples[i + 2]
  if redis.call('HINCRBY', KEYS[triples[i]], triples[i + 1], amount) == amount then
    created[triples[i]] = true
  end
end
for k in pairs(created) do
  -- TTL is a read: renewing on every new sample was an EXPIRE and a ZADD, writes that replicas and the AOF
  -- repeat, for nearly every hash of every batch.
  if redis.call('TTL', KEYS[k]) < ttls[k] - run_down then
    redis.call('EXPIRE', KEYS[k], ttls[k])
    redis.call('ZADD', index, 0, members[k])
  end
end
redis.call('EXPIRE', index, ARGV[4])
return #triples / 3
