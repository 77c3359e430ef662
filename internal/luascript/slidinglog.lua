-- Sliding log (Go: slidinglog.Log).
-- Parameters: $1 limit, $2 window in µs.
-- State: a sorted set with one member per instant at which cost was
-- admitted, scored by that instant; the member is the cumulative cost the
-- key admitted up to and including it, in decimal, modulo 2^52 (the span of
-- cumulative costs a key holds at once is far below that, so differences
-- taken modulo 2^52 are exact). Memory grows with the admissions in a
-- window, never with their cost. Instants are never earlier than the
-- newest member's: a clock that stepped back decides at the newest
-- instant, so scores and cumulative costs rise together. The cost in the
-- window ending at t is the newest member's count less that of the newest
-- member at or before t − window (0 when there is none: nothing was
-- trimmed yet). Every command is O(log n) in the members n, except the
-- trim of expired members, which an admission bounds to 1000 and which
-- always keeps the newest expired member, as the base of the count.
-- A key written by the format before this one (one member "<instant>:<n>"
-- per unit of cost), a key of another type, or members or scores out of
-- range are refused with an RLMISMATCH error, never misread.
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])
local modulus = 4503599627370496 -- 2^52
local trim = 1000

local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest.err then
  return redis.error_reply('RLMISMATCH ' .. key .. ' is not a sorted set, not a sliding log')
end
local t, last, total = now, nil, 0
if newest[1] then
  -- Fresh locals: miniredis's Lua mistakes "x = a and b" for an x
  -- already set when a is a call that returns nothing.
  local n = string.match(newest[1], '^%d+$') and tonumber(newest[1])
  total, last = n, tonumber(newest[2])
  if not (n and n < modulus and last and last >= -9007199254740992 and last <= 9007199254740992 and last == math.floor(last)) then
    return redis.error_reply('RLMISMATCH ' .. key .. ' does not hold a sliding log of this version (old keys: delete them or let them expire)')
  end
  if last > t then
    t = last
  end
end
local cut = t - window
local cutarg = string.format('%.0f', cut)
local used, base, expired = 0, 0, false
if last then
  if last > cut then
    local dead = redis.call('ZREVRANGEBYSCORE', key, cutarg, '-inf', 'LIMIT', 0, 1)
    if dead[1] then
      local b = string.match(dead[1], '^%d+$') and tonumber(dead[1])
      if not (b and b < modulus) then
        return redis.error_reply('RLMISMATCH ' .. key .. ' holds a member that is not of a sliding log')
      end
      base, expired = b, true
    end
    used = total - base
    if used < 0 then
      used = used + modulus
    end
  else
    expired = true -- every member; the newest is the base
  end
end

local fits = used + cost <= limit

--@report
local rem, retry, reset = limit - used, 0, 0
if rem < 0 then
  rem = 0 -- counted under a larger limit
end
do
  local excess = used + cost - limit
  if excess > 0 then
    -- The first member whose leaving takes excess out of the window: the
    -- live members are the ranks from first on, each adding at least 1,
    -- so it is within excess of first. A rank past the end stands for
    -- the newest, which takes all of used (≥ excess) out.
    local first = redis.call('ZCOUNT', key, '-inf', cutarg)
    local lo, hi = first, first + excess - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = redis.call('ZRANGE', key, mid, mid)
      local out = excess
      local v = m[1] and tonumber(m[1])
      if v then
        out = v - base
        if out < 0 then
          out = out + modulus
        end
      end
      if out >= excess then
        hi = mid
      else
        lo = mid + 1
      end
    end
    local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
    retry = tonumber(e[2]) + window - now
  end
end
if used > 0 then
  reset = last + window - now
end

--@commit
total = total + cost
if total >= modulus then
  total = total - modulus
end
local dead = 0
if expired then
  dead = redis.call('ZCOUNT', key, '-inf', cutarg)
end
used = used + cost
local reset = t + window - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
if last == t then
  redis.call('ZREM', key, newest[1]) -- one member per instant
end
redis.call('ZADD', key, string.format('%.0f', t), string.format('%.0f', total))
if dead > 1 then
  local n = dead - 1
  if n > trim then
    n = trim
  end
  redis.call('ZREMRANGEBYRANK', key, 0, n - 1)
end
redis.call('PEXPIRE', key, ttl + margin)
local rem = limit - used
