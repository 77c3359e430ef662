-- A minimal continuous token bucket, as one would write it by hand.
-- KEYS[1] the key; ARGV: now µs, cost, capacity, tokens per second.
-- The value is "<tokens> <last µs>"; the key lives until the bucket is full.
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local capacity, rate = tonumber(ARGV[3]), tonumber(ARGV[4]) / 1e6
local tokens, last = capacity, now
local v = redis.call('GET', KEYS[1])
if v then
  local t, l = string.match(v, '^(%S+) (%S+)$')
  tokens, last = tonumber(t), tonumber(l)
end
local avail = tokens + math.max(now - last, 0) * rate
if avail > capacity then
  avail = capacity
end
if cost > avail then
  return {math.max(math.floor(avail), 0), math.ceil((cost - avail) / rate), math.ceil((capacity - avail) / rate)}
end
avail = avail - cost
local reset = math.ceil((capacity - avail) / rate)
redis.call('SET', KEYS[1], string.format('%.17g %d', avail, math.max(now, last)), 'PX', math.ceil(reset / 1000) + 1000)
return {math.floor(avail), 0, reset}
