-- Fixed window (Go: fixedwindow.Window).
-- Parameters: $1 limit, $2 window in µs.
-- State: a string "<window index> <count>". A clock that stepped back into
-- an earlier window stays in the counted one, unless that window starts
-- more than 2^48 µs (algorithm.MaxDuration) after now's: no clock steps
-- back that far, and such an index is another window length's (a minute's
-- index read as an hour's lies centuries ahead), so the state counts as
-- fresh rather than make every wait that long. A value that is not such a
-- state, or a count above 2^40 (no limit is larger), is refused with an
-- RLMISMATCH error.
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
local state = redis.pcall('GET', key)
if state then
  if type(state) == 'table' then
    return redis.error_reply('RLMISMATCH ' .. key .. ' is not a string, not a fixed window')
  end
  local stored, counted = string.match(state, '^(%-?%d+) (%d+)$')
  stored, counted = tonumber(stored), tonumber(counted)
  if not (stored and counted and stored >= -9007199254740992 and stored <= 9007199254740992 and counted <= 1099511627776) then
    return redis.error_reply('RLMISMATCH ' .. key .. ' holds ' .. #state .. ' bytes that are not a fixed window')
  end
  local ahead = 1 -- at least: ⌊2^48/window⌋ ≥ 1
  if stored > index + 1 then
    -- ⌊2^48/window⌋, the most windows a counted one may lie ahead,
    -- computed only past the next window.
    ahead = math.floor(281474976710656 / window)
    if ahead * window > 281474976710656 then
      ahead = ahead - 1
    elseif (ahead + 1) * window <= 281474976710656 then
      ahead = ahead + 1
    end
  end
  if counted > 0 and stored >= index and stored <= index + ahead then
    index, count = stored, counted
  end
end

local ends = (index + 1) * window - now
local fits = count + cost <= limit

--@report
local rem, retry, reset = limit - count, ends, 0
if rem < 0 then
  rem = 0 -- counted under a larger limit
end
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
