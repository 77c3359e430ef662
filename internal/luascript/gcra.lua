-- GCRA (Go: gcra.Meter).
-- ARGV[4] burst, ARGV[5] emission interval in µs.
-- State: the theoretical arrival time (TAT) in Unix µs, written as a
-- decimal integer, which Redis keeps as an integer (no string allocated).
-- The key is at rest once TAT has passed. Every number is a whole number
-- below 2^53, so the arithmetic is exact, as in Go.
local every = tonumber(ARGV[5])
local tau = tonumber(ARGV[4]) * every

-- debt: µs from now until TAT; 0 once it has passed.
local debt = 0
local state = redis.call('GET', key)
if state then
  local tat = tonumber(state)
  if not tat or not string.match(state, '^%-?%d+$') then
    return redis.error_reply('ratelimit: ' .. key .. ' does not hold a GCRA state')
  end
  debt = tat - now
  if debt < 0 then
    debt = 0
  end
end

local after = debt + cost * every
local admit = not peek and after <= tau
if admit then
  debt = after
end
-- ⌊(tau − debt)/every⌋, corrected where the division rounds.
local remaining = 0
if debt < tau then
  remaining = math.floor((tau - debt) / every)
  if remaining * every > tau - debt then
    remaining = remaining - 1
  elseif (remaining + 1) * every <= tau - debt then
    remaining = remaining + 1
  end
end

if not admit then
  local retry = after - tau
  if retry < 0 then
    retry = 0
  end
  return {remaining, retry, debt}
end

local ttl = math.ceil(debt / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('SET', key, string.format('%.0f', now + debt), 'PX', ttl + margin)
return {remaining, 0, debt}
