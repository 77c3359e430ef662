-- Token bucket refilled by whole tokens (Go: tokenbucket.IntervalBucket).
-- Parameters: ARGV[$1] capacity, ARGV[$2] tokens per interval, ARGV[$3] interval in µs.
-- State: the header "I<capacity>:", then "<tokens> <instant of the last
-- refill µs>", tokens within ±2^53 (below zero, a debt: booked ahead), the
-- instant within ±2^53; anything else is refused with an RLMISMATCH error
-- (or started afresh).
--#setup capacity, per, interval
local capacity = tonumber(ARGV[$1])
local per = tonumber(ARGV[$2])
local interval = tonumber(ARGV[$3])
--#setupend

-- floordiv(a, b) is ⌊a/b⌋ for b > 0, exact for whole numbers below 2^53,
-- and wait(held, target, at_us, now_us) the µs from now_us until a bucket
-- that holds held, refilled last at at_us, holds target. The parts off the
-- common path define them; the common path writes them out: a function is
-- a closure made again on every call.
--#convert
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
--#converted
local tokens, last = capacity, now
--#convert
-- Started from a state of another kind (Go: algorithm.Carry): a fresh
-- state charged what that one had used, at most the limit, at now.
if carried > 0 then
  tokens = capacity - math.min(carried, capacity)
end
--#converted
if state then
  local k, l
--#parse k, l
  k, l = string.match(state, '^(%-?%d+) (%-?%d+)$', at)
  k, l = tonumber(k), tonumber(l)
--#parsed
  if k and l and k >= -9007199254740992 and k <= 9007199254740992 and l >= -9007199254740992 and l <= 9007199254740992 then
    tokens, last = k, l
--#convert
    if old0 then
      -- Written under capacity old0 (design §2.2): refilled up to now on
      -- this bucket's schedule with the old capacity, then what was used
      -- stays used (as-is) or the fraction held carries (proportional,
      -- rounded down: more used).
      if tokens >= old0 then
        tokens, last = old0, math.max(last, now)
      elseif now > last then
        local ticks = floordiv(now - last, interval)
        if ticks >= floordiv(old0 - tokens + per - 1, per) then
          tokens, last = old0, now
        else
          tokens, last = tokens + ticks * per, last + ticks * interval
        end
      end
      if not proportional then
        local least = 0
        if tokens < 0 then
          least = tokens -- a debt (units booked ahead) is kept
        end
        tokens = tokens + capacity - old0
        if tokens < least then
          tokens = least
        end
      elseif tokens >= 0 then
        -- muldiv returns ⌊a·b/c⌋ for whole numbers 0 ≤ a, b ≤ 2^40, 1 ≤ c ≤ 2^40:
        -- a product below 2^53 is exact as it is, a larger one is divided by
        -- long division, 4 bits of b at a time.
        local function muldiv(a, b, c)
          local p = a * b
          if p < 9007199254740992 then
            return floordiv(p, c)
          end
          local q, r = 0, 0
          for shift = 48, 0, -4 do
            local x = r * 16 + a * (math.floor(b / 2 ^ shift) % 16)
            local d = floordiv(x, c)
            q, r = q * 16 + d, x - d * c
          end
          return q
        end
        tokens = muldiv(tokens, capacity, old0)
      end
      local most = floordiv(281474976710656, interval) * per -- no debt beyond 2^48 µs of refill, nor 2^53
      if most > 9007199254740992 then
        most = 9007199254740992
      end
      if tokens < -most then
        tokens = -most
      end
      if tokens >= capacity then
        last = math.max(last, now)
      end
    end
--#converted
  else
--#unreadable ' holds ' .. #state .. ' bytes that are not a token bucket'
  end
end

-- Refill up to now by whole intervals; a refill that fills the bucket
-- restarts the interval at now.
if tokens >= capacity then
  tokens, last = capacity, math.max(last, now)
elseif now > last then
  -- ticks: the whole intervals since last; need: the refills that fill it.
  local ticks, need = math.floor((now - last) / interval), math.floor((capacity - tokens + per - 1) / per)
  if ticks * interval > now - last then
    ticks = ticks - 1
  elseif (ticks + 1) * interval <= now - last then
    ticks = ticks + 1
  end
  if need * per > capacity - tokens + per - 1 then
    need = need - 1
  elseif (need + 1) * per <= capacity - tokens + per - 1 then
    need = need + 1
  end
  if ticks >= need then
    tokens, last = capacity, now
  else
    tokens, last = tokens + ticks * per, last + ticks * interval
  end
end


local fits = cost <= tokens

--@report
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local function wait(held, target, at_us, now_us)
  if held >= target then
    return 0
  end
  return at_us + floordiv(target - held + per - 1, per) * interval - now_us
end
local rem, retry, reset = math.max(tokens, 0), wait(tokens, cost, last, now), wait(tokens, capacity, last, now)

--@commit
tokens = tokens - cost
-- reset: wait(tokens, capacity, last, now), written out.
local reset = 0
if tokens < capacity then
  local n = math.floor((capacity - tokens + per - 1) / per)
  if n * per > capacity - tokens + per - 1 then
    n = n - 1
  elseif (n + 1) * per <= capacity - tokens + per - 1 then
    n = n + 1
  end
  reset = last + n * interval - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local rem = tokens
--#encode tokens, last
local value = string.format('%d %d', tokens, last)

--@book
-- Booked at now for act (Go: IntervalBucket.Book): what a Take at act
-- would leave since the refill la, dated ticks whole intervals before la,
-- back to at most max(last, now), with ticks refills owed (at most 2^53
-- tokens).
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local function wait(held, target, at_us, now_us)
  if held >= target then
    return 0
  end
  return at_us + floordiv(target - held + per - 1, per) * interval - now_us
end
local held, la = tokens, last
if held >= capacity then
  held, la = capacity, math.max(last, act)
elseif act > last then
  local ticks = floordiv(act - last, interval)
  if ticks >= floordiv(capacity - held + per - 1, per) then
    held, la = capacity, act
  else
    held, la = held + ticks * per, last + ticks * interval
  end
end
local ticks = floordiv(la - math.max(last, now) + interval - 1, interval)
local owed = 9007199254740992
if ticks <= floordiv(9007199254740992, per) then
  owed = ticks * per
end
tokens, last = held - cost - owed, la - ticks * interval
local reset = wait(tokens, capacity, last, now)
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%d %d', tokens, last)
local rem = math.max(tokens, 0)

--@refund
-- Up to n tokens back (Go: IntervalBucket.Refund), to the capacity; a
-- full bucket has nothing to give back. By key nothing while in debt:
-- bookings not yet due.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local function wait(held, target, at_us, now_us)
  if held >= target then
    return 0
  end
  return at_us + floordiv(target - held + per - 1, per) * interval - now_us
end
if keyed and tokens < 0 then
  n = 0
end
local value
local gave = 0 -- how many it gave back
if tokens < capacity and n > 0 then
  gave = capacity - tokens -- apart: gopher-lua (miniredis) assigns "a, b = x, f(a)" in turn
  if n < gave then
    gave = n
  end
  tokens = tokens + gave
  value = string.format('%d %d', tokens, last)
end
local rem, retry, reset = math.max(tokens, 0), wait(tokens, 1, last, now), wait(tokens, capacity, last, now)
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end

--@unused
-- What a booking of bcost due at act gives back (Go:
-- IntervalBucket.Unused): all of it while nothing is booked after it (no
-- debt at act), else nothing: the refills between may fill the bucket,
-- which absorbs its units.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local function wait(held, target, at_us, now_us)
  if held >= target then
    return 0
  end
  return at_us + floordiv(target - held + per - 1, per) * interval - now_us
end
local give = 0
if act > now then
  local due = tokens
  if due < capacity and act > last then
    local ticks = floordiv(act - last, interval)
    if ticks >= floordiv(capacity - due + per - 1, per) then
      due = capacity
    else
      due = due + ticks * per
    end
  end
  if due >= 0 then
    give = bcost
  end
end

--@undo
-- What an admission of bcost due at act ≤ now gives back (Go:
-- IntervalBucket.Undo): bcost less per for each refill that can have come
-- since act, ⌈(now − act)/interval⌉ of them; nothing while in debt
-- (bookings not yet due).
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local function wait(held, target, at_us, now_us)
  if held >= target then
    return 0
  end
  return at_us + floordiv(target - held + per - 1, per) * interval - now_us
end
local give = 0
local ticks = floordiv(now - act + interval - 1, interval)
if ticks < floordiv(bcost + per - 1, per) and tokens >= 0 then
  give = bcost - ticks * per
end

--@used
-- What an interval bucket's state had used (Go: intervalUsed): capacity −
-- tokens as stored.
local x = string.match(fv, '^(%-?%d+) (%-?%d+)$', at)
if x then
  x = tonumber(x)
end
if p0 <= 1099511627776 and x and x >= -9007199254740992 and x <= 9007199254740992 then
  used = p0 - x
end
