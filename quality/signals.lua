-- Apply one Kafka partition's share of a batch to the signals of every partner-day it holds, in the partition's
-- MULTI/EXEC: one call per partition and batch (a partner-day gets ~3 views per batch, so a call per
-- partner-day cost more in its own set-up than in its writes).
-- KEYS: per partner-day, its signals hash and its address hash (address -> views).
-- ARGV[1]: the TTL; then per partner-day, in the order of KEYS: h, a (how many hash increments and addresses
--   follow), h pairs (field, n), pv first, then a pairs (address, views). Repeat views come counted (the
--   consumer compares each buyer's views in its memory), as one more field. An address hash grown past
--   HASHTABLE_PAST_FIELDS is made a hashtable (to_hashtable_if_due: cpsproject/common/to_hashtable.lua).
-- Every value is a string passed through as it came (no cjson, and no Lua number that redis.call would format
-- back with %.17g).
-- A key's TTL is set when the key is created, not renewed by every apply: pv is written by every apply, so
-- its reply equal to its increment means the signals hash is new; an address hash is new only if every
-- address it was given is.
local ttl = ARGV[1]
local number_of = {}  -- an address's views, most often '1': each text turned into a number once
local at = 2
for day = 1, #KEYS, 2 do
  local signals, addresses = KEYS[day], KEYS[day + 1]
  local h, a = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  at = at + 2
  if redis.call('HINCRBY', signals, ARGV[at], ARGV[at + 1]) == tonumber(ARGV[at + 1]) then
    redis.call('EXPIRE', signals, ttl)
  end
  for i = at + 2, at + 2 * h - 1, 2 do
    redis.call('HINCRBY', signals, ARGV[i], ARGV[i + 1])
  end
  at = at + 2 * h
  if a > 0 then
    local new_addresses = 0
    for i = at, at + 2 * a - 1, 2 do
      local views = ARGV[i + 1]
      local n = number_of[views]
      if not n then n = tonumber(views); number_of[views] = n end
      if redis.call('HINCRBY', addresses, ARGV[i], views) == n then
        new_addresses = new_addresses + 1
      end
    end
    if new_addresses == a then
      redis.call('EXPIRE', addresses, ttl)
    end
    if new_addresses > 0 then
      to_hashtable_if_due(addresses, new_addresses)
    end
    at = at + 2 * a
  end
end
return 1
