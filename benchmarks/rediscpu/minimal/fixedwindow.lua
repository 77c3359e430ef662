-- A minimal fixed window.
-- KEYS[1] the key; ARGV: now µs, cost, limit, window µs.
-- The value is "<window index> <count>".
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local index = math.floor(now / window)
local count = 0
local v = redis.call('GET', KEYS[1])
if v then
  local i, c = string.match(v, '^(%d+) (%d+)$')
  if tonumber(i) == index then
    count = tonumber(c)
  end
end
local ends = (index + 1) * window - now
if count + cost > limit then
  return {limit - count, ends, ends}
end
count = count + cost
redis.call('SET', KEYS[1], index .. ' ' .. count, 'PX', math.ceil(ends / 1000) + 1000)
return {limit - count, 0, ends}
