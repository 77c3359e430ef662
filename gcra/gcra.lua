-- GCRA (Go: gcra.Meter).
-- Parameters: ARGV[$1] burst, ARGV[$2] emission interval in µs.
-- State: the header "G<burst>,<every>:", then the theoretical arrival time
-- (TAT) in Unix µs, in decimal, within ±2^53; anything else is refused
-- with an RLMISMATCH error (or started afresh).
-- The key is at rest once TAT has passed. Every number is a whole number
-- below 2^53, so the arithmetic is exact, as in Go.
-- rem, the units that fit with a debt, is ⌊(tau − debt)/every⌋, corrected
-- where the division rounds: written out where it is needed, since a
-- function would be a closure made again on every call.
--#setup every, tau
local every = tonumber(ARGV[$2])
local tau = tonumber(ARGV[$1]) * every
--#setupend

-- debt: µs from now until TAT; 0 once it has passed.
local debt = 0
--#convert
-- Started from a state of another kind (Go: algorithm.Carry): a fresh
-- state charged what that one had used, at most the limit, at now.
if carried > 0 then
  debt = carried * every -- exact up to tau (2^48), far above it when larger
  if debt > tau then
    debt = tau
  end
end
--#converted
if state then
  local tat
--#parse tat
  tat = string.match(state, '^(%-?%d+)$', at)
  if tat then
    tat = tonumber(tat) -- not tonumber(nil): miniredis's Lua raises an error
  end
--#parsed
  local readable = tat and tat >= -9007199254740992 and tat <= 9007199254740992
--#convert
  readable = readable and not (old0 and old0 * old1 > 281474976710656)
--#converted
  if readable then
    debt = tat - now
    if debt < 0 then
      debt = 0
    end
--#convert
    if old0 and debt > 0 then
      -- Written under burst old0 and emission interval old1 (design
      -- §2.3): the debt is carried as units used (as-is: debt·every/old1,
      -- capped at tau) or as the fraction of the old tau used
      -- (proportional), rounded up: more used. mulup(a, b, c) is
      -- ⌈a·b/c⌉ for whole numbers a, b, c ≤ 2^48 whose quotient is at
      -- most 2^50: long division, 4 bits of b at a time, every
      -- intermediate below 2^53.
      local function mulup(a, b, c)
        local q, r = 0, 0
        for shift = 48, 0, -4 do
          local x = r * 16 + a * (math.floor(b / 2 ^ shift) % 16)
          local d = math.floor(x / c)
          if d * c > x then
            d = d - 1
          elseif (d + 1) * c <= x then
            d = d + 1
          end
          q, r = q * 16 + d, x - d * c
        end
        if r > 0 then
          q = q + 1
        end
        return q
      end
      -- Beyond the old tau (units booked ahead, or a clock that stepped
      -- back) the debt carries as the same units at this interval, at
      -- most 2^48.
      local otau, beyond = old0 * old1, 0
      if debt > otau then
        beyond = debt - otau -- apart: miniredis's Lua assigns a list in turn
        debt = otau
        if beyond > 281474976710656 then
          beyond = 281474976710656 -- a clock that stepped back years: 2^48 keeps mulup exact
        end
        if beyond / old1 * every > 562949953421312 then
          beyond = 281474976710656 -- far over 2^48: no need to be exact
        else
          beyond = mulup(beyond, every, old1)
          if beyond > 281474976710656 then
            beyond = 281474976710656
          end
        end
      end
      if proportional then
        debt = mulup(debt, tau, otau)
      elseif debt / old1 * every > 2 * tau then
        debt = tau -- far more than tau: no need to be exact
      else
        debt = mulup(debt, every, old1)
        if debt > tau then
          debt = tau
        end
      end
      debt = debt + beyond
    end
--#converted
  else
--#unreadable ' holds ' .. #state .. ' bytes that are not a GCRA state'
  end
end

local after = debt + cost * every
local fits = after <= tau


--@report
local rem, retry, reset = 0, after - tau, debt
if debt < tau then
  rem = math.floor((tau - debt) / every)
  if rem * every > tau - debt then
    rem = rem - 1
  elseif (rem + 1) * every <= tau - debt then
    rem = rem + 1
  end
end
if retry < 0 then
  retry = 0
end

--@commit
debt = after
local ttl = math.ceil(debt / 1000)
if ttl < 2 then
  ttl = 2
end
local rem, reset = 0, debt
if debt < tau then
  rem = math.floor((tau - debt) / every)
  if rem * every > tau - debt then
    rem = rem - 1
  elseif (rem + 1) * every <= tau - debt then
    rem = rem + 1
  end
end
local tat = now + debt
--#encode tat
local value = string.format('%d', tat)

--@book
-- Booked at now for act (Go: Meter.Book): the TAT a Take at act would
-- leave, max(TAT, act) + cost intervals, kept as the debt from now.
if debt < act - now then
  debt = act - now
end
debt = debt + cost * every
local ttl = math.ceil(debt / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%d', now + debt)
local rem, reset = 0, debt
if debt < tau then
  rem = math.floor((tau - debt) / every)
  if rem * every > tau - debt then
    rem = rem - 1
  elseif (rem + 1) * every <= tau - debt then
    rem = rem + 1
  end
end

--@refund
-- Up to n units back (Go: Meter.Refund): TAT n intervals earlier, but not
-- before now; a key at rest has nothing to give back. By key nothing
-- while the debt is above tau: bookings not yet due.
if keyed and debt > tau then
  n = 0
end
local value
local gave = 0 -- how many it gave back, a part of one counting whole
if debt > 0 and n > 0 then
  gave = n
  if n * every >= debt then
    gave = math.ceil(debt / every)
  end
  if n * every < debt then
    debt = debt - n * every
  else
    debt = 0
  end
  value = string.format('%d', now + debt)
end
local rem, retry, reset = 0, debt + every - tau, debt
if debt < tau then
  rem = math.floor((tau - debt) / every)
  if rem * every > tau - debt then
    rem = rem - 1
  elseif (rem + 1) * every <= tau - debt then
    rem = rem + 1
  end
end
if retry < 0 then
  retry = 0
end
local ttl = math.ceil(debt / 1000)
if ttl < 2 then
  ttl = 2
end

--@unused
-- What a booking of bcost due at act gives back (Go: Meter.Unused): all
-- of it unless bookings are due after act, until TAT − tau; else bcost
-- less the intervals by which they pass act, rounded to the nearest (a
-- tie down). With no debt, TAT has passed: nothing is due after act.
local give = 0
if act > now then
  local late = debt - tau - (act - now)
  if debt == 0 or late <= 0 then
    give = bcost
  else
    local v = bcost * every - late
    if v > 0 then
      local w = 2 * every
      give = math.floor((2 * v + every - 1) / w)
      if give * w > 2 * v + every - 1 then
        give = give - 1
      elseif (give + 1) * w <= 2 * v + every - 1 then
        give = give + 1
      end
    end
  end
end

--@undo
-- What an admission of bcost due at act ≤ now gives back (Go:
-- Meter.Undo): bcost less the intervals begun since act,
-- ⌈(now − act)/every⌉; nothing while the debt is above tau (bookings not
-- yet due).
local give = 0
local late = now - act
if debt > tau then
  late = bcost * every
end
if late < bcost * every then
  local q = math.floor((late + every - 1) / every)
  if q * every > late + every - 1 then
    q = q - 1
  elseif (q + 1) * every <= late + every - 1 then
    q = q + 1
  end
  give = bcost - q
end

--@used
-- What a GCRA state had used at now (Go: used): its debt in emission
-- intervals, ⌈max(TAT − now, 0)/every⌉.
local tat = string.match(fv, '^(%-?%d+)$', at)
if tat then
  tat = tonumber(tat)
end
if p0 <= 1099511627776 and tat and tat >= -9007199254740992 and tat <= 9007199254740992 then
  used = 0
  if tat > now then
    local d = tat - now
    used = math.floor(d / p1)
    if used * p1 > d then
      used = used - 1
    elseif (used + 1) * p1 <= d then
      used = used + 1
    end
    if used * p1 < d then
      used = used + 1
    end
  end
end
