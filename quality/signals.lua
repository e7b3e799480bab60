-- Apply one Kafka partition's share of a batch to one partner-day's signals, in the partition's MULTI/EXEC.
-- KEYS[1]: the signals hash; KEYS[2]: the address sorted set; KEYS[3]: the last-view hash (openid -> seconds).
-- ARGV[1]: JSON {"h": [field, n, ...] increments of the hash, "a": [address, views, ...],
--                "v": [openid, seconds, ...] the views with a buyer in time order, "w": repeat window, "t": TTL}.
-- A view within the window after the openid's latest view is a repeat; the latest view only moves forward,
-- so a view that arrives after a later one is compared with that later one and counted by the recount alone.
local args = cjson.decode(ARGV[1])
local counts, addresses, views = args.h, args.a, args.v
for i = 1, #counts, 2 do
  redis.call('HINCRBY', KEYS[1], counts[i], counts[i + 1])
end
if #addresses > 0 then
  for i = 1, #addresses, 2 do
    redis.call('ZINCRBY', KEYS[2], addresses[i + 1], addresses[i])
  end
  redis.call('EXPIRE', KEYS[2], args.t)
end
if #views > 0 then
  local window, repeats = args.w, 0
  for i = 1, #views, 2 do
    local openid, seconds = views[i], views[i + 1]
    local last = tonumber(redis.call('HGET', KEYS[3], openid))
    if last and seconds >= last and seconds - last <= window then
      repeats = repeats + 1
    end
    if not last or seconds > last then
      redis.call('HSET', KEYS[3], openid, seconds)
    end
  end
  if repeats > 0 then
    redis.call('HINCRBY', KEYS[1], 'repeats', repeats)
  end
  redis.call('EXPIRE', KEYS[3], args.t)
end
redis.call('EXPIRE', KEYS[1], args.t)
return 1
