-- Read PV buckets (stats/counters/pageviews.py). KEYS: bucket hashes of one partition. Returns one string,
-- a line per bucket of its tree, self, bot and gen fields, tab-separated (a missing bucket's line is three
-- tabs): a thousand buckets come back as one reply instead of a thousand parsed ones.
local lines = {}
for k = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[k], 'tree', 'self', 'bot', 'gen')
  lines[k] = (v[1] or '') .. '\t' .. (v[2] or '') .. '\t' .. (v[3] or '') .. '\t' .. (v[4] or '')
end
return table.concat(lines, '\n')
