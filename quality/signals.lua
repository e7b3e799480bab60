-- Apply one Kafka partition's share of a batch to the signals of every partner-day it holds, in the partition's
-- MULTI/EXEC: one call per partition and batch (a partner-day gets ~3 views per batch, so a call per
-- partner-day cost more in its own set-up than in its writes).
-- KEYS: per partner-day, its signals hash, its address hash (address -> views) and its last-view hash
-- (openid -> seconds).
-- ARGV[1]: the repeat window in seconds, ARGV[2]: the TTL; then per partner-day, in the order of KEYS:
--   h, a, o (how many hash increments, addresses and openids follow), h pairs (field, n), a pairs (address,
--   views), then per openid: openid, k, its k view times in time order.
-- Every value is a string passed through as it came (no cjson, and no Lua number that redis.call would format
-- back with %.17g).
-- A view within the window after the openid's latest view is a repeat; the latest view only moves forward,
-- so a view that arrives after a later one is compared with that later one and counted by the recount alone.
-- One HMGET reads the latest view of each openid, one HSET writes the ones that moved.
local window, ttl = tonumber(ARGV[1]), ARGV[2]
-- unpack() is bounded by Lua's C stack (8,000 values): a busy partner-day's openids go 1,000 at a time.
local CHUNK = 1000
local function hmget(key, fields)
  local values = {}
  for first = 1, #fields, CHUNK do
    local got = redis.call('HMGET', key, unpack(fields, first, math.min(first + CHUNK - 1, #fields)))
    for i = 1, #got do
      values[first + i - 1] = got[i]
    end
  end
  return values
end
local function hset(key, pairs)
  for first = 1, #pairs, 2 * CHUNK do
    redis.call('HSET', key, unpack(pairs, first, math.min(first + 2 * CHUNK - 1, #pairs)))
  end
end
local at = 3
for day = 1, #KEYS, 3 do
  local signals, addresses, last = KEYS[day], KEYS[day + 1], KEYS[day + 2]
  local h, a, o = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  at = at + 3
  for i = at, at + 2 * h - 1, 2 do
    redis.call('HINCRBY', signals, ARGV[i], ARGV[i + 1])
  end
  at = at + 2 * h
  if a > 0 then
    for i = at, at + 2 * a - 1, 2 do
      redis.call('HINCRBY', addresses, ARGV[i], ARGV[i + 1])
    end
    redis.call('EXPIRE', addresses, ttl)
    at = at + 2 * a
  end
  if o > 0 then
    local openids, starts = {}, {}
    for i = 1, o do
      openids[i], starts[i] = ARGV[at], at + 2
      at = at + 2 + tonumber(ARGV[at + 1])
    end
    local stored = hmget(last, openids)
    local moved, repeats = {}, 0
    for i = 1, o do
      local latest = tonumber(stored[i])
      local text = nil
      for j = starts[i], starts[i] + tonumber(ARGV[starts[i] - 1]) - 1 do
        local seconds = tonumber(ARGV[j])
        if latest and seconds >= latest and seconds - latest <= window then
          repeats = repeats + 1
        end
        if not latest or seconds > latest then
          latest, text = seconds, ARGV[j]
        end
      end
      if text then
        moved[#moved + 1] = openids[i]
        moved[#moved + 1] = text
      end
    end
    if repeats > 0 then
      redis.call('HINCRBY', signals, 'repeats', repeats)
    end
    if #moved > 0 then
      hset(last, moved)
    end
    redis.call('EXPIRE', last, ttl)
  end
  redis.call('EXPIRE', signals, ttl)
end
return 1
