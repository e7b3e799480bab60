-- Many hash increments in one call (stats/counters/hincrby.py).
-- KEYS: the hashes, then an index of them (one hash tag). ARGV: JSON [ttl per hash], JSON [hash number,
-- field, amount, ...] (flat triples), JSON [the index member of each hash], the index's TTL. A hash in which an
-- increment creates a field gets its TTL and its index entry again.
local index = KEYS[#KEYS]
local ttls, triples, members = cjson.decode(ARGV[1]), cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
local created = {}
for i = 1, #triples, 3 do
  local amount = triples[i + 2]
  if redis.call('HINCRBY', KEYS[triples[i]], triples[i + 1], amount) == amount then
    created[triples[i]] = true
  end
end
for k in pairs(created) do
  redis.call('EXPIRE', KEYS[k], ttls[k])
  redis.call('ZADD', index, 0, members[k])
end
redis.call('EXPIRE', index, ARGV[4])
return #triples / 3
