-- Count the repeat views of one partner-day in one Kafka partition's share of a batch.
-- KEYS[1]: the partner-day's last-view hash (openid -> epoch seconds); KEYS[2]: its signals hash.
-- ARGV[1]: the repeat window in seconds; then openid, seconds pairs in time order.
-- A view within the window after the openid's latest view is a repeat; the latest view only moves forward,
-- so a view that arrives late is compared with a later one and counted by the exact recount alone.
local window = tonumber(ARGV[1])
local repeats = 0
for i = 2, #ARGV, 2 do
  local openid = ARGV[i]
  local seconds = tonumber(ARGV[i + 1])
  local last = tonumber(redis.call('HGET', KEYS[1], openid))
  if last and seconds >= last and seconds - last <= window then
    repeats = repeats + 1
  end
  if not last or seconds > last then
    redis.call('HSET', KEYS[1], openid, seconds)
  end
end
if repeats > 0 then
  redis.call('HINCRBY', KEYS[2], 'repeats', repeats)
end
return repeats
