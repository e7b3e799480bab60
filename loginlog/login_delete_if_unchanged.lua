-- Delete a user-month bitmap only if it still holds the bits confirmed in MySQL (a login may have raced the
-- sync), and take the user out of its block's month index.
-- KEYS[1] the month bitmap, KEYS[2] the block's month index (same block tag); ARGV[1] the bits read,
-- ARGV[2] the user id.
local now = redis.call('GET', KEYS[1])
if now and now ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
