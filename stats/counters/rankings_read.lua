-- The PV per partner over one partition's live slots of a window and scope (stats/counters/rankings.py).
-- KEYS: the slot index. ARGV: the oldest live slot's start. Returns a flat list: partner, PV, partner, PV, …
-- (one reply per partition instead of one per slot).
local totals, order = {}, {}
for _, slot in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf')) do
  local counts = redis.call('HGETALL', slot)
  for i = 1, #counts, 2 do
    local code = counts[i]
    if totals[code] == nil then
      totals[code] = 0
      order[#order + 1] = code
    end
    totals[code] = totals[code] + tonumber(counts[i + 1])
  end
end
local reply = {}
for _, code in ipairs(order) do
  reply[#reply + 1] = code
  reply[#reply + 1] = string.format('%d', totals[code])
end
return reply
