-- Many hash increments in one call (stats/counters/hincrby.py).
-- KEYS: the hashes, then an index of them (one hash tag). ARGV: the hashes' TTL, the index's TTL, how far a
-- hash's TTL may run down before a write renews it, the "hash field amount" triples as one space-separated
-- string, JSON [the index member of each hash]. Fields and amounts stay strings: Lua would format each number
-- back into text for redis.call (printf's %.17g was the largest cost after the increments), and a JSON of
-- numbers costs a strtod each to decode.
-- Only a hash in which an increment creates a field is looked at: a new one gets its TTL and index entry; one
-- whose TTL has run down that far gets both again.
local index = KEYS[#KEYS]
local ttl, run_down = tonumber(ARGV[1]), tonumber(ARGV[3])
local created, increments = {}, 0
-- A batch repeats few distinct hash numbers and amounts: each string becomes a number once.
local number_of = {}
for hash, field, amount in string.gmatch(ARGV[4], '(%d+) (%d+) (%d+)') do
  local k, n = number_of[hash], number_of[amount]
  if not k then k = tonumber(hash); number_of[hash] = k end
  if not n then n = tonumber(amount); number_of[amount] = n end
  if redis.call('HINCRBY', KEYS[k], field, amount) == n then
    created[k] = true
  end
  increments = increments + 1
end
local members
for k in pairs(created) do
  -- TTL is a read: renewing on every new sample was an EXPIRE and a ZADD, writes that replicas and the AOF
  -- repeat, for nearly every hash of every batch.
  if redis.call('TTL', KEYS[k]) < ttl - run_down then
    members = members or cjson.decode(ARGV[5])
    redis.call('EXPIRE', KEYS[k], ARGV[1])
    redis.call('ZADD', index, 0, members[k])
  end
end
redis.call('EXPIRE', index, ARGV[2])
return increments
