-- The union of HyperLogLogs given as bytes: their merged bytes and its count, leaving no key behind.
-- KEYS[1]: a scratch key; KEYS[2]: a second one in its slot (PFMERGE reads stored HyperLogLogs from keys only).
-- ARGV: the HyperLogLogs' bytes (none: an empty HyperLogLog).
-- Returns {merged bytes, PFCOUNT}.
local target, part = KEYS[1], KEYS[2]
if #ARGV == 0 then
  redis.call('PFMERGE', target)
else
  redis.call('SET', target, ARGV[1])
end
for i = 2, #ARGV do
  redis.call('SET', part, ARGV[i])
  redis.call('PFMERGE', target, part)
end
local count = redis.call('PFCOUNT', target)
local merged = redis.call('GET', target)
redis.call('DEL', target, part)
return {merged, count}
