-- Sliding log (Go: slidinglog.Log).
-- Parameters: $1 limit, $2 window in µs.
-- State: a sorted set with one member per unit of admitted cost, scored by
-- the instant it was admitted; members are "<instant>:<n>", n counting the
-- units admitted at that instant, so they never collide. An entry counts
-- while its instant is after now − window.
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])

local cut = now - window
local after = string.format('(%.0f', cut)
local used = redis.call('ZCOUNT', key, after, '+inf')

-- reset_after: µs from now until the newest entry leaves the window.
local function reset_after()
  if used == 0 then
    return 0
  end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return tonumber(newest[2]) + window - now
end

local fits = used + cost <= limit

--@report
local retry = 0
local excess = used + cost - limit
if excess > 0 then
  local oldest = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', excess - 1, 1)
  retry = tonumber(oldest[2]) + window - now
end
local rem, reset = limit - used, reset_after()

--@commit
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', cut))
local at = string.format('%.0f', now)
local first = redis.call('ZCOUNT', key, at, at)
local args, n = {}, 0
for i = first, first + cost - 1 do
  args[n + 1] = at
  args[n + 2] = at .. ':' .. string.format('%.0f', i)
  n = n + 2
  if n == 1000 or i == first + cost - 1 then
    redis.call('ZADD', key, unpack(args, 1, n))
    n = 0
  end
end
used = used + cost
local reset = reset_after()
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('PEXPIRE', key, ttl + margin)
local rem = limit - used
