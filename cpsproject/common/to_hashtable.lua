-- Included before a counter script that grows hashes (cpsproject/common/lua.py, TO_HASHTABLE), after the line
-- that sets HASHTABLE_PAST_FIELDS. A hash that a call takes past a multiple of HASHTABLE_PAST_FIELDS fields is
-- made a hashtable if it is not one yet: checked at every multiple, not only the first, since a hash loaded
-- from RDB (a restart, a replica's sync, a slot migrated to another master) comes back a listpack.
local function thresholds_passed(length)  -- 0 up to HASHTABLE_PAST_FIELDS fields, 1 up to twice it, ...
  return math.floor((length - 1) / HASHTABLE_PAST_FIELDS)
end
local function to_hashtable_if_due(key, new_fields)
  local length = redis.call('HLEN', key)
  if length > HASHTABLE_PAST_FIELDS and thresholds_passed(length) > thresholds_passed(length - new_fields)
      and redis.call('OBJECT', 'ENCODING', key) ~= 'hashtable' then
    -- A value longer than hash-max-listpack-value converts the hash; deleted in the same call, unseen.
    redis.call('HSET', key, '', string.rep('-', 4096))
    redis.call('HDEL', key, '')
  end
end
