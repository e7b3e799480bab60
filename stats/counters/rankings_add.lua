-- Add a batch's page views to a ranking window (stats/counters/rankings.py).
-- KEYS: one partition's slot index and totals of a window and scope, then its slot hashes. ARGV: the safety
-- TTL, then JSON: each slot's start epoch, then (slot number, partner, PV) triples. Slot and total move
-- together, so totals == sum of live slots.
local starts, triples = cjson.decode(ARGV[2]), cjson.decode(ARGV[3])
for i = 1, #triples, 3 do
  redis.call('HINCRBY', KEYS[2 + triples[i]], triples[i + 1], triples[i + 2])
  redis.call('ZINCRBY', KEYS[2], triples[i + 2], triples[i + 1])
end
for i = 1, #starts do
  redis.call('ZADD', KEYS[1], starts[i], KEYS[2 + i])
  redis.call('EXPIRE', KEYS[2 + i], ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
return #triples / 3
