-- Delete flushed PV buckets that still hold what was flushed (stats/counters/pageviews.py).
-- KEYS: the partition's bucket index, then buckets of that partition. ARGV[1]: the buckets' lines as
-- pageviews_read.lua returned them, joined by newlines (one argument, not four per bucket). A bucket
-- incremented since is kept for the next flush; the deleted ones leave the index in one ZREM.
local expected, from, gone = ARGV[1], 1, {}
for k = 2, #KEYS do
  local to = string.find(expected, '\n', from, true) or (#expected + 1)
  local v = redis.call('HMGET', KEYS[k], 'tree', 'self', 'bot', 'gen')
  local now = (v[1] or '') .. '\t' .. (v[2] or '') .. '\t' .. (v[3] or '') .. '\t' .. (v[4] or '')
  if now == string.sub(expected, from, to - 1) then gone[#gone + 1] = KEYS[k] end
  from = to + 1
end
if #gone > 0 then
  redis.call('DEL', unpack(gone))
  redis.call('ZREM', KEYS[1], unpack(gone))
end
return #gone
