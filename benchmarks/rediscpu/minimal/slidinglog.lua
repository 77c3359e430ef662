-- A minimal sliding log: a sorted set of admissions scored by their
-- instant, trimmed to the window on every call. Each member is one unit
-- (cost 1, the common path).
-- KEYS[1] the key; ARGV: now µs, cost, limit, window µs.
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
if used + cost > limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local retry = tonumber(oldest[2]) + window - now
  return {math.max(limit - used, 0), retry, window}
end
redis.call('ZADD', KEYS[1], now, ARGV[1] .. ':' .. used)
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000) + 1000)
return {limit - used - cost, 0, window}
