-- Token bucket refilled by whole tokens (Go: tokenbucket.IntervalBucket).
-- Parameters: $1 capacity, $2 tokens per interval, $3 interval in µs.
-- State: the header "I<capacity>:", then "<tokens> <instant of the last
-- refill µs>", tokens in [0, 2^53], the instant within ±2^53; anything
-- else is refused with an RLMISMATCH error (or started afresh).
local capacity = tonumber(ARGV[$1])
local per = tonumber(ARGV[$2])
local interval = tonumber(ARGV[$3])

-- floordiv returns ⌊a/b⌋ for b > 0, exact for whole numbers below 2^53.
local function floordiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local tokens, last = capacity, now
if state then
  local k, l = string.match(state, '^(%d+) (%-?%d+)$', at)
  k, l = tonumber(k), tonumber(l)
  if k and l and k <= 9007199254740992 and l >= -9007199254740992 and l <= 9007199254740992 then
    tokens, last = k, l
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
      if ARGV[$mode] == '1' or ARGV[$mode] == '3' then
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
      else
        tokens = tokens + capacity - old0
        if tokens < 0 then
          tokens = 0
        end
      end
      if tokens >= capacity then
        last = math.max(last, now)
      end
    end
  elseif not afresh then
    return redis.error_reply('RLMISMATCH ' .. hkey .. ' field ' .. ARGV[$id] .. ' holds ' .. #state .. ' bytes that are not a token bucket')
  end
end

-- Refill up to now by whole intervals; a refill that fills the bucket
-- restarts the interval at now.
if tokens >= capacity then
  tokens, last = capacity, math.max(last, now)
elseif now > last then
  local ticks = floordiv(now - last, interval)
  if ticks >= floordiv(capacity - tokens + per - 1, per) then
    tokens, last = capacity, now
  else
    tokens, last = tokens + ticks * per, last + ticks * interval
  end
end

-- wait: µs from now until the bucket holds target tokens.
local function wait(held, target)
  if held >= target then
    return 0
  end
  return last + floordiv(target - held + per - 1, per) * interval - now
end

local fits = cost <= tokens

--@report
local rem, retry, reset = tokens, wait(tokens, cost), wait(tokens, capacity)

--@commit
tokens = tokens - cost
local reset = wait(tokens, capacity)
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%.0f %.0f', tokens, last)
local rem = tokens
