-- A minimal sliding-window counter: this window's count plus the previous
-- window's, weighted by how much of it the sliding window still covers.
-- KEYS[1] the key; ARGV: now µs, cost, limit, window µs.
-- The value is "<window index> <count> <previous count>".
local now, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, window = tonumber(ARGV[3]), tonumber(ARGV[4])
local index = math.floor(now / window)
local count, prev = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local i, c, p = string.match(v, '^(%d+) (%d+) (%d+)$')
  i = tonumber(i)
  if i == index then
    count, prev = tonumber(c), tonumber(p)
  elseif i == index - 1 then
    prev = tonumber(c)
  end
end
local elapsed = now - index * window
local used = count + math.ceil(prev * (window - elapsed) / window)
local reset = 2 * window - elapsed
if used + cost > limit then
  local retry = window - elapsed
  if count + cost <= limit then
    retry = window - math.floor((limit - count - cost) * window / prev) - elapsed
  end
  return {math.max(limit - used, 0), retry, reset}
end
count = count + cost
redis.call('SET', KEYS[1], index .. ' ' .. count .. ' ' .. prev, 'PX', math.ceil(reset / 1000) + 1000)
return {limit - used - cost, 0, reset}
