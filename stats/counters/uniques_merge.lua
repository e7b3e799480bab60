-- The union of HyperLogLogs given as bytes: their merged bytes and its count, leaving no key behind.
-- KEYS: one scratch key per blob, all in one slot; the first ends up holding the union.
-- ARGV: the HyperLogLogs' bytes, one per key (none: an empty HyperLogLog, in KEYS[1]).
-- Returns {merged bytes, PFCOUNT}.
local target = KEYS[1]
for i = 1, #ARGV do
  redis.call('SET', KEYS[i], ARGV[i])
end
-- One PFMERGE of many sources reads each once; a PFMERGE per source would rewrite the target every time.
-- In chunks: unpack() is bounded by Lua's C stack.
if #ARGV <= 1 then
  redis.call('PFMERGE', target)
end
for first = 2, #ARGV, 1000 do
  redis.call('PFMERGE', target, unpack(KEYS, first, math.min(first + 999, #ARGV)))
end
local count = redis.call('PFCOUNT', target)
local merged = redis.call('GET', target)
for first = 1, math.max(#ARGV, 1), 1000 do
  redis.call('DEL', unpack(KEYS, first, math.min(first + 999, math.max(#ARGV, 1))))
end
return {merged, count}
