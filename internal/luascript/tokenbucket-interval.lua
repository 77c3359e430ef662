-- Token bucket refilled by whole tokens (Go: tokenbucket.IntervalBucket).
-- Parameters: $1 capacity, $2 tokens per interval, $3 interval in µs.
-- State: a string "<tokens> <instant of the last refill µs>", tokens in
-- [0, 2^53], the instant within ±2^53; anything else is refused with an
-- RLMISMATCH error.
local capacity = tonumber(ARGV[$1])
local per = tonumber(ARGV[$2])
local interval = tonumber(ARGV[$3])

-- floordiv returns ⌊a/b⌋ for b > 0, exact for whole numbers below 2^53.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local tokens, last = capacity, now
local state = redis.pcall('GET', key)
if state then
  if type(state) == 'table' then
    return redis.error_reply('RLMISMATCH ' .. key .. ' is not a string, not a token bucket')
  end
  local k, l = string.match(state, '^(%d+) (%-?%d+)$')
  k, l = tonumber(k), tonumber(l)
  if not (k and l and k <= 9007199254740992 and l >= -9007199254740992 and l <= 9007199254740992) then
    return redis.error_reply('RLMISMATCH ' .. key .. ' holds ' .. #state .. ' bytes that are not a token bucket')
  end
  tokens, last = k, l
end

-- Refill up to now by whole intervals; a refill that fills the bucket
-- restarts the interval at now.
if tokens >= capacity then
  tokens, last = capacity, math.max(last, now)
elseif now > last then
  local ticks = floordiv(now - last, interval)
  if ticks >= floordiv(capacity - tokens + per - 1, per) then
    tokens, last = capacity, now
  else
    tokens, last = tokens + ticks * per, last + ticks * interval
  end
end

-- wait: µs from now until the bucket holds target tokens.
local function wait(held, target)
  if held >= target then
    return 0
  end
  return last + floordiv(target - held + per - 1, per) * interval - now
end

local fits = cost <= tokens

--@report
local rem, retry, reset = tokens, wait(tokens, cost), wait(tokens, capacity)

--@commit
tokens = tokens - cost
local reset = wait(tokens, capacity)
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('SET', key, string.format('%.0f %.0f', tokens, last), 'PX', ttl + margin)
local rem = tokens
