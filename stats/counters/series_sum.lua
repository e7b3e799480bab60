-- Sum some samples of each of one partition's series counters (stats/counters/series.py): what a ranking's
-- tree scope reads. KEYS: the counters' hashes. ARGV: the samples' fields. Returns each hash's sum as text, in
-- the order of KEYS (one reply per partition instead of a sample list per counter).
local sums = {}
for k = 1, #KEYS do
  local total = 0
  for _, value in ipairs(redis.call('HMGET', KEYS[k], unpack(ARGV))) do
    if value then total = total + tonumber(value) end
  end
  sums[k] = string.format('%d', total)
end
return sums
