-- One client's sliding log of request times under a throttle: DRF's SimpleRateThrottle, kept in Redis.
-- KEYS[1]: the log, a list of times (seconds), newest first.
-- ARGV: now, duration (seconds), limit (requests per duration), record (1: add now when allowed; 0: only check).
-- Returns {allowed (1/0), times still in the window, the oldest of them (or "")}.
local log = KEYS[1]
local now, duration, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
while true do
  local oldest = redis.call('LINDEX', log, -1)
  if not oldest or tonumber(oldest) > now - duration then break end
  redis.call('RPOP', log)
end
local count = redis.call('LLEN', log)
local allowed = count < limit
if allowed and ARGV[4] == '1' then
  redis.call('LPUSH', log, ARGV[1])
  redis.call('EXPIRE', log, math.ceil(duration))
  count = count + 1
end
return {allowed and 1 or 0, count, redis.call('LINDEX', log, -1) or ''}
