-- Expire the slots of a ranking window that fell out of it (stats/counters/rankings.py).
-- KEYS: one partition's slot index of a window and scope. ARGV: the oldest live slot's start. Slot keys come
-- from the index (same hash tag). A read sums only the live slots, so this frees memory and decides nothing.
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
if #expired > 0 then
  redis.call('DEL', unpack(expired))
  redis.call('ZREM', KEYS[1], unpack(expired))
end
return #expired
