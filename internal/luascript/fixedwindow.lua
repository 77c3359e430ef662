-- Fixed window (Go: fixedwindow.Window).
-- Parameters: $1 limit, $2 window in µs.
-- State: a string "<window index> <count>". A clock that stepped back into
-- an earlier window stays in the counted one.
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])

-- The window of now, ⌊now/window⌋, exact for whole numbers below 2^53.
local index = math.floor(now / window)
if index * window > now then
  index = index - 1
elseif (index + 1) * window <= now then
  index = index + 1
end
local count = 0
local state = redis.call('GET', key)
if state then
  local sp = string.find(state, ' ', 1, true)
  local stored = tonumber(string.sub(state, 1, sp - 1))
  local counted = tonumber(string.sub(state, sp + 1))
  if counted > 0 and stored >= index then
    index, count = stored, counted
  end
end

local ends = (index + 1) * window - now
local fits = count + cost <= limit

--@report
local rem, retry, reset = limit - count, ends, 0
if fits then
  retry = 0
end
if count > 0 then
  reset = ends
end

--@commit
count = count + cost
local ttl = math.ceil(ends / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('SET', key, string.format('%.0f %.0f', index, count), 'PX', ttl + margin)
local rem, reset = limit - count, ends
