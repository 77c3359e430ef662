-- A minimal GCRA.
-- KEYS[1] the key; ARGV: now µs, cost, burst, emission interval µs.
-- The value is the theoretical arrival time in µs.
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local every = tonumber(ARGV[4])
local tau = tonumber(ARGV[3]) * every
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local after = tat - now + cost * every
if after > tau then
  return {math.floor((tau - tat + now) / every), after - tau, tat - now}
end
redis.call('SET', KEYS[1], now + after, 'PX', math.ceil(after / 1000) + 1000)
return {math.floor((tau - after) / every), 0, after}
