-- Continuous token bucket (Go: tokenbucket.Bucket).
-- ARGV[4] capacity, ARGV[5] rate in tokens per second.
-- State: a string "<tokens as %.17g> <last update µs>".
local capacity = tonumber(ARGV[4])
local per_micro = tonumber(ARGV[5]) / 1e6

local tokens, last = capacity, now
local state = redis.call('GET', key)
if state then
  local sp = string.find(state, ' ', 1, true)
  tokens = tonumber(string.sub(state, 1, sp - 1))
  last = tonumber(string.sub(state, sp + 1))
end

-- after: the stored tokens plus e µs of refill, uncapped.
local function after(e)
  return tokens + e * per_micro
end

-- at: tokens held at t; time going backwards adds nothing.
local function at(t)
  local elapsed = t - last
  if elapsed < 0 then
    elapsed = 0
  end
  local v = after(elapsed)
  if v > capacity then
    v = capacity
  end
  return v
end

-- wait: µs from now until the bucket holds target tokens, given that it
-- holds held now; exact.
local function wait(target, held)
  if held >= target then
    return 0
  end
  local e = math.ceil((target - tokens) / per_micro)
  while after(e) < target do
    e = e + 1
  end
  while e > 0 and after(e - 1) >= target do
    e = e - 1
  end
  return last + e - now
end

local avail = at(now)
if peek or cost > avail then
  local allowed = 0
  if avail >= cost then
    allowed = 1
  end
  return {allowed, capacity, math.floor(avail), wait(cost, avail), wait(capacity, avail)}
end

tokens = avail - cost
last = math.max(last, now)
local reset = wait(capacity, tokens)
redis.call('SET', key, string.format('%.17g', tokens) .. ' ' .. int(last), 'PX', ttl_ms(reset))
return {1, capacity, math.floor(tokens), 0, reset}
