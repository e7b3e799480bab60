-- Expire the slots of a ranking window that fell out of it (stats/counters/rankings.py).
-- KEYS: one partition's slot index and totals of a window and scope. ARGV: the oldest live slot's start.
-- Slot keys come from the index (same hash tag). Subtracting a slot from the totals and deleting it happen
-- together, so totals == sum of live slots between any two commands.
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
for _, slot in ipairs(expired) do
  local counts = redis.call('HGETALL', slot)
  for i = 1, #counts, 2 do
    local left = tonumber(redis.call('ZINCRBY', KEYS[2], -tonumber(counts[i + 1]), counts[i]))
    if left <= 0 then redis.call('ZREM', KEYS[2], counts[i]) end
  end
  redis.call('DEL', slot)
  redis.call('ZREM', KEYS[1], slot)
end
return #expired
