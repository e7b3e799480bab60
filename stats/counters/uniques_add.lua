-- Add a batch's visitors to the day HyperLogLogs of one Kafka partition (stats/counters/uniques.py).
-- KEYS: HyperLogLogs. ARGV: the safety TTL, then JSON: per key the list of users to add. PFADD takes a few
-- thousand members per call (Lua's stack bounds unpack).
-- Only a HyperLogLog this call creates gets the TTL: a day is written for the maximum lateness at most, and
-- flush deletes its HyperLogLogs once it is settled, far inside the TTL, so renewing it every batch (a write,
-- repeated by replicas and the AOF) bought nothing. TTL is a read; one created again by a view that came after
-- its day was flushed away has none and gets it.
local members = cjson.decode(ARGV[2])
for i = 1, #KEYS do
  local users = members[i]
  for first = 1, #users, 4000 do
    redis.call('PFADD', KEYS[i], unpack(users, first, math.min(first + 3999, #users)))
  end
  if redis.call('TTL', KEYS[i]) < 0 then
    redis.call('EXPIRE', KEYS[i], ARGV[1])
  end
end
return #KEYS
