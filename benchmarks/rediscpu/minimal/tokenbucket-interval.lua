-- A minimal token bucket refilled by whole tokens per interval.
-- KEYS[1] the key; ARGV: now µs, cost, capacity, tokens per interval,
-- interval µs. The value is "<tokens> <last refill µs>".
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local capacity, per, interval = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tokens, last = capacity, now
local v = redis.call('GET', KEYS[1])
if v then
  local t, l = string.match(v, '^(%S+) (%S+)$')
  tokens, last = tonumber(t), tonumber(l)
end
if now > last then
  local ticks = math.floor((now - last) / interval)
  tokens, last = tokens + ticks * per, last + ticks * interval
  if tokens >= capacity then
    tokens, last = capacity, now
  end
end
local function wait(target)
  if tokens >= target then
    return 0
  end
  return last + math.ceil((target - tokens) / per) * interval - now
end
if cost > tokens then
  return {tokens, wait(cost), wait(capacity)}
end
tokens = tokens - cost
local reset = wait(capacity)
redis.call('SET', KEYS[1], string.format('%d %d', tokens, last), 'PX', math.ceil(reset / 1000) + 1000)
return {tokens, 0, reset}
