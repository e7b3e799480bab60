-- Delete a flushed day HyperLogLog that still holds what was flushed (stats/counters/uniques.py).
-- KEYS: the HyperLogLog, its partition's index of that day, the partition's index of days (one hash tag).
-- ARGV: the bytes read, the day stamp. A key PFADDed since is kept for the next flush.
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], KEYS[1])
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('ZREM', KEYS[3], ARGV[2]) end
return 1
