-- GCRA (Go: gcra.Meter).
-- Parameters: $1 burst, $2 emission interval in µs.
-- State: the theoretical arrival time (TAT) in Unix µs, written as a
-- decimal integer, which Redis keeps as an integer (no string allocated),
-- within ±2^53; anything else is refused with an RLMISMATCH error.
-- The key is at rest once TAT has passed. Every number is a whole number
-- below 2^53, so the arithmetic is exact, as in Go.
local every = tonumber(ARGV[$2])
local tau = tonumber(ARGV[$1]) * every

-- debt: µs from now until TAT; 0 once it has passed.
local debt = 0
local state = redis.pcall('GET', key)
if state then
  if type(state) == 'table' then
    return redis.error_reply('RLMISMATCH ' .. key .. ' is not a string, not a GCRA state')
  end
  local tat = string.match(state, '^%-?%d+$') and tonumber(state)
  if not (tat and tat >= -9007199254740992 and tat <= 9007199254740992) then
    return redis.error_reply('RLMISMATCH ' .. key .. ' holds ' .. #state .. ' bytes that are not a GCRA state')
  end
  debt = tat - now
  if debt < 0 then
    debt = 0
  end
end

local after = debt + cost * every
local fits = after <= tau

-- left: ⌊(tau − d)/every⌋, the units that fit with debt d, corrected
-- where the division rounds.
local function left(d)
  if d >= tau then
    return 0
  end
  local n = math.floor((tau - d) / every)
  if n * every > tau - d then
    n = n - 1
  elseif (n + 1) * every <= tau - d then
    n = n + 1
  end
  return n
end

--@report
local rem, retry, reset = left(debt), after - tau, debt
if retry < 0 then
  retry = 0
end

--@commit
debt = after
local ttl = math.ceil(debt / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('SET', key, string.format('%.0f', now + debt), 'PX', ttl + margin)
local rem, reset = left(debt), debt
