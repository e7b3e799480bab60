-- Many hash increments in one call (stats/counters/hincrby.py).
-- KEYS: the hashes, then an index of them (one hash tag). ARGV: the hashes' TTL, the index's TTL, how far a
-- hash's TTL may run down before a write renews it, the fields' width, then the increments as two strings:
-- per increment, 8 bytes (its hash's number and its amount, big-endian unsigned 32-bit) and its field's
-- digits (all of one width), then JSON [the index member of each hash]. A hash grown past
-- HASHTABLE_PAST_FIELDS is made a hashtable (to_hashtable_if_due: cpsproject/common/to_hashtable.lua).
-- Why bytes: matching a pattern per increment (string.gmatch over text) and a strtod per number were 14 % of
-- the script's instructions, and a number passed as a Lua number is formatted back into text by printf for
-- each redis.call; here an increment costs one struct.unpack and one string.sub, and an amount is turned into
-- text once per distinct amount.
-- Only a hash in which an increment creates a field is looked at: a new one gets its TTL and index entry; one
-- whose TTL has run down that far gets both again.
local index = KEYS[#KEYS]
local ttl, run_down, width = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local numbers, fields = ARGV[5], ARGV[6]
local unpack_numbers, sub, call = struct.unpack, string.sub, redis.call
local created, text_of = {}, {}
local increments = #numbers / 8
for at = 0, increments - 1 do
  local k, n = unpack_numbers('>I4I4', numbers, 8 * at + 1)
  local amount = text_of[n]
  if not amount then amount = tostring(n); text_of[n] = amount end
  if call('HINCRBY', KEYS[k], sub(fields, width * at + 1, width * at + width), amount) == n then
    created[k] = (created[k] or 0) + 1
  end
end
local members
for k, new_fields in pairs(created) do
  -- TTL is a read: renewing on every new sample was an EXPIRE and a ZADD, writes that replicas and the AOF
  -- repeat, for nearly every hash of every batch.
  if call('TTL', KEYS[k]) < ttl - run_down then
    members = members or cjson.decode(ARGV[7])
    call('EXPIRE', KEYS[k], ARGV[1])
    call('ZADD', index, 0, members[k])
  end
  to_hashtable_if_due(KEYS[k], new_fields)
end
call('EXPIRE', index, ARGV[2])
return increments
