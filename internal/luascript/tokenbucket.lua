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

-- The tokens held now: the stored ones plus what refilled since last,
-- capped; time going backwards adds nothing.
local elapsed = now - last
if elapsed < 0 then
  elapsed = 0
end
local avail = tokens + elapsed * per_micro
if avail > capacity then
  avail = capacity
end

-- wait: µs from now until the bucket holds target tokens, given that it
-- holds held now; exact, as the refill above computes it.
local function wait(target, held)
  if held >= target then
    return 0
  end
  local e = math.ceil((target - tokens) / per_micro)
  while tokens + e * per_micro < target do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= target do
    e = e - 1
  end
  return last + e - now
end

if peek or cost > avail then
  local allowed = 0
  if avail >= cost then
    allowed = 1
  end
  return {allowed, math.floor(avail), wait(cost, avail), wait(capacity, avail)}
end

tokens = avail - cost
if now > last then
  last = now
end
local reset = wait(capacity, tokens)
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('SET', key, string.format('%.17g %.0f', tokens, last), 'PX', ttl + margin)
return {1, math.floor(tokens), 0, reset}
