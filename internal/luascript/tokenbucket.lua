-- Continuous token bucket (Go: tokenbucket.Bucket).
-- ARGV[4] capacity, ARGV[5] rate in tokens per second.
-- State: a string "<tokens as %.17g> <last update µs>".
local capacity = tonumber(ARGV[4])
local rate = tonumber(ARGV[5])

local tokens, last = capacity, now
local state = redis.call('GET', key)
if state then
  local sp = string.find(state, ' ', 1, true)
  tokens = tonumber(string.sub(state, 1, sp - 1))
  last = tonumber(string.sub(state, sp + 1))
end

-- at: tokens held at t; time going backwards adds nothing.
local function at(t)
  local elapsed = t - last
  if elapsed < 0 then
    elapsed = 0
  end
  local v = tokens + (elapsed * rate) / 1e6
  if v > capacity then
    v = capacity
  end
  return v
end

-- wait: µs from now until the bucket holds target tokens; exact.
local function wait(target)
  if at(now) >= target then
    return 0
  end
  local function reaches(e)
    return tokens + (e * rate) / 1e6 >= target
  end
  local e = math.ceil((target - tokens) * 1e6 / rate)
  while not reaches(e) do
    e = e + 1
  end
  while e > 0 and reaches(e - 1) do
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
  return {allowed, capacity, math.floor(avail), wait(cost), wait(capacity)}
end

tokens = avail - cost
last = math.max(last, now)
local reset = wait(capacity)
redis.call('SET', key, string.format('%.17g', tokens) .. ' ' .. int(last), 'PX', ttl_ms(reset))
return {1, capacity, math.floor(tokens), 0, reset}
