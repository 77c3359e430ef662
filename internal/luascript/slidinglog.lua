-- Sliding log (Go: slidinglog.Log).
-- ARGV[4] limit, ARGV[5] window in µs.
-- State: a sorted set with one member per unit of admitted cost, scored by
-- the instant it was admitted; members are "<instant>:<n>", n counting the
-- units admitted at that instant, so they never collide. An entry counts
-- while its instant is after now − window.
local limit = tonumber(ARGV[4])
local window = tonumber(ARGV[5])

local cut = now - window
local after = '(' .. int(cut)
local used = redis.call('ZCOUNT', key, after, '+inf')

-- newest: the instant of the newest entry, or nil when the log is empty.
local function newest()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    return tonumber(last[2])
  end
  return nil
end

local function reset_after()
  if used == 0 then
    return 0
  end
  return newest() + window - now
end

if peek or used + cost > limit then
  local allowed, retry = 1, 0
  local excess = used + cost - limit
  if excess > 0 then
    allowed = 0
    local oldest = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', excess - 1, 1)
    retry = tonumber(oldest[2]) + window - now
  end
  return {allowed, limit, limit - used, retry, reset_after()}
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cut))
local at = int(now)
local first = redis.call('ZCOUNT', key, at, at)
local args, n = {}, 0
for i = first, first + cost - 1 do
  args[n + 1] = at
  args[n + 2] = at .. ':' .. int(i)
  n = n + 2
  if n == 1000 or i == first + cost - 1 then
    redis.call('ZADD', key, unpack(args, 1, n))
    n = 0
  end
end
used = used + cost
local reset = reset_after()
redis.call('PEXPIRE', key, ttl_ms(reset))
return {1, limit, limit - used, 0, reset}
