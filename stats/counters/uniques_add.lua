-- Add a batch's visitors to the day HyperLogLogs of one Kafka partition (stats/counters/uniques.py).
-- KEYS: HyperLogLogs. ARGV: the safety TTL, then JSON: per key the list of users to add. PFADD takes a few
-- thousand members per call (Lua's stack bounds unpack).
local members = cjson.decode(ARGV[2])
for i = 1, #KEYS do
  local users = members[i]
  for first = 1, #users, 4000 do
    redis.call('PFADD', KEYS[i], unpack(users, first, math.min(first + 3999, #users)))
  end
  redis.call('EXPIRE', KEYS[i], ARGV[1])
end
return #KEYS
