-- Add a batch's page views to a ranking window (stats/counters/rankings.py).
-- KEYS: one partition's slot index of a window and scope, then its slot hashes. ARGV: the safety TTL, the
-- slots' start epochs, then "slot partner PV" triples, each list one space-separated string: values stay
-- strings (Lua would turn each number back into text for redis.call) and need no JSON decoding.
local index, ttl = KEYS[1], ARGV[1]
local added = 0
-- A slot number repeats for each of its partners: its key is looked up once (tonumber is a strtod).
local key_of = {}
for number, code, amount in string.gmatch(ARGV[3], '(%S+) (%S+) (%S+)') do
  local key = key_of[number]
  if not key then key = KEYS[1 + tonumber(number)]; key_of[number] = key end
  redis.call('HINCRBY', key, code, amount)
  added = added + 1
end
-- After the increments: EXPIRE does nothing to a slot that does not exist yet.
local slot = 1
for start in string.gmatch(ARGV[2], '%S+') do
  redis.call('ZADD', index, start, KEYS[1 + slot])
  redis.call('EXPIRE', KEYS[1 + slot], ttl)
  slot = slot + 1
end
redis.call('EXPIRE', index, ttl)
return added
