-- Sliding log (Go: slidinglog.Log).
-- Parameters: ARGV[$1] limit, ARGV[$2] window in µs.
-- State: a sorted set with one member per instant at which cost was
-- admitted, scored by that instant; the member is the cumulative cost the
-- key admitted up to and including it, in decimal, modulo 2^52 (the span of
-- cumulative costs a key holds at once is far below that, so differences
-- taken modulo 2^52 are exact). Memory grows with the admissions in a
-- window, never with their cost. Bookings are members at the instant they
-- are due, and every member after t − window counts at t, later ones
-- included. The log's clock (Go: N1) is the latest instant a charge was
-- decided at; a decision at now is made at t = max(now, clock) (a clock
-- that stepped back: what the trims forgot had left the window there). A
-- charge is logged at t, a booking at the instant it is due, or either at
-- the newest member when that is later, so that scores and cumulative
-- costs rise together. The clock is the newest member's score, unless the
-- set holds a clock member, "#M<clock>" at score -inf (after the header,
-- rank 1), which it does only while they differ (a booking is ahead). The
-- cost in the window ending at t is the newest member's count less that
-- of the newest member at or before t − window (0 when there is none:
-- nothing was trimmed yet). Every command is O(log n) in the members n, except the
-- trim of expired members, which an admission bounds to 1000 and which
-- always keeps the newest expired member, as the base of the count.
-- The set's first member is its header, "#L<window µs>" at score -inf.
-- A set of an older format (without the header), a key of another type,
-- or members or scores out of range are refused with an RLMISMATCH
-- error, never misread (or started afresh).
--#setup limit, window, modulus, trim
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])
local modulus = 4503599627370496 -- 2^52
local trim = 1000
--#setupend

-- The sorted set, zkey, opens with its header member, hdr ("#L" and the
-- window), at score -inf (the load checks it: head is its first two
-- members), so every rank below counts from 1. The clock member follows
-- it when there is one; newest is the newest member, when it is neither.
local newest, mh, mclock = {}, nil, nil
--#convert
-- A set carried over from another window (old0, design §2.6).
local oldw = old0
--#converted
if state then
  if head[3] and (head[4] == '-inf' or tonumber(head[4]) == -math.huge) then
    local c = string.match(head[3], '^#M(%-?%d+)$')
    if c then
      mh, mclock = head[3], tonumber(c)
    end
  end
  newest = redis.call('ZRANGE', zkey, '-1', '-1', 'WITHSCORES')
  if newest[1] == head[1] or newest[1] == mh then
    newest = {} -- the header (and a clock) alone
  end
end
local t, last, total, clock = now, nil, 0, nil
if newest[1] then
  -- Fresh locals: miniredis's Lua mistakes "x = a and b" for an x
  -- already set when a is a call that returns nothing.
  local n = string.match(newest[1], '^%d+$') and tonumber(newest[1])
  total, last = n, tonumber(newest[2])
  if not (n and n < modulus and last and last >= -9007199254740992 and last <= 9007199254740992 and last == math.floor(last)) then
--#unreadable ' holds a member that is not of a sliding log'
--#convert
    wipe, oldw, total, last = 1, nil, 0, nil
--#converted
  else
    clock = mclock or last
    if clock > t then
      t = clock
    end
  end
end
local cut = t - window
-- Members at or before basecut are not counted: those before cut, and,
-- for a log kept under a shorter window oldw, every member at or before
-- the clock less oldw, since the trims under oldw may have removed the
-- ones between.
local basecut = cut
--#convert
if oldw and clock and clock - oldw > cut then
  basecut = clock - oldw
end
--#converted
local cutarg = string.format('%d', basecut)
local used, base, expired = 0, 0, false
local dead = nil -- the base member first, when there is one
if last then
  if last > basecut then
    -- Bounds are never "(-inf": miniredis reads it as -inf, inclusive.
    -- The header member, at -inf, stands for no member. The two members
    -- before the base come with it: when one of them alone is dead too, the
    -- trim removes it by name.
--#plain
    dead = redis.call('ZREVRANGEBYSCORE', zkey, cutarg, '-inf', 'LIMIT', '0', '3')
--#convert
    dead = redis.call('ZREVRANGEBYSCORE', zkey, cutarg, '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
--#converted
    if dead[1] and string.byte(dead[1], 1) ~= 35 then -- 35 is '#'
      local b = string.match(dead[1], '^%d+$') and tonumber(dead[1])
      if not (b and b < modulus) then
--#unreadable ' holds a member that is not of a sliding log'
--#convert
        -- Started afresh: nothing is counted, the set is replaced.
        wipe, oldw, total, last, dead = 1, nil, 0, nil, nil
--#converted
      else
        base, expired = b, true
      end
    else
      dead = nil
    end
    if last then
      used = total - base
      if used < 0 then
        used = used + modulus
      end
    end
  else
    expired = true -- every member; the newest is the base
    if last > cut then
      -- Carried over (basecut is later than cut): the base lies in the
      -- window, so an admission moves it to cut, as a dead member.
      dead = newest
    end
  end
end

--#convert
if carried > 0 then
  -- No member yet: the carried units stand for one at now, which an
  -- admission writes with its own (the cumulative count starts at them).
  carried = math.min(carried, limit)
  used, total = carried, carried
end
--#converted

local fits = used + cost <= limit

--@report
local rem, retry, reset = limit - used, 0, 0
if rem < 0 then
  rem = 0 -- counted under a larger limit
end
do
  local excess = used + cost - limit
  if excess > 0 and not last then
    retry = window -- carried alone: one member at now, holding used ≥ excess
  elseif excess > 0 then
    -- The first member whose leaving takes excess out of the window: the
    -- live members are the ranks from first on, each adding at least 1,
    -- so it is within excess of first. A rank past the end stands for
    -- the newest, which takes all of used (≥ excess) out.
    local first = redis.call('ZCOUNT', zkey, '-inf', cutarg)
    local lo, hi = first, first + excess - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = redis.call('ZRANGE', zkey, mid, mid)
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
    local e = redis.call('ZRANGE', zkey, lo, lo, 'WITHSCORES')
    retry = tonumber(e[2]) + window - now
  end
end
if used > 0 then
  reset = (last or now) + window - now
end

--@commit
-- The cost is logged at t, or at the newest member when that is later (a
-- booking ahead), and the clock is t.
total = total + cost
if total >= modulus then
  total = total - modulus
end
local rec = t
if last and last > rec then
  rec = last
end
-- The dead members to trim, all but the base: one alone (gone), read
-- with the base, goes by name; more are counted (ndead, with the base).
local ndead, gone = 0, nil
if expired then
--#plain
  if dead and dead[2] and string.byte(dead[2], 1) ~= 35 and not (dead[3] and string.byte(dead[3], 1) ~= 35) then
    gone = dead[2]
  end
  if not gone then
--#convert
  do
--#converted
    ndead = redis.call('ZCOUNT', zkey, '-inf', cutarg) - 1 -- not the header
    if mh then
      ndead = ndead - 1 -- nor the clock
    end
  end
end
used = used + cost
local reset = rec + window - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
--#convert
if wipe == 1 then
  redis.call('DEL', zkey)
elseif wipe == 2 then
  redis.call('HDEL', hkey, ARGV[$id])
end
--#converted
if mh then
  redis.call('ZREM', zkey, mh) -- first: the ranks below count from 1
end
--#convert
if oldw then
  -- Carried over from another window: the new header, and the members
  -- at or before basecut go but for the base, moved to cut at the
  -- latest so that it stays before the window (design §2.6).
  redis.call('ZREM', zkey, head[1]) -- the old header
  if dead and dead[1] then
    if ndead > 1 then
      -- The old header is gone: the dead members are the ranks from 0,
      -- and the last of them (rank ndead - 1) is the base, which stays.
      redis.call('ZREMRANGEBYRANK', zkey, 0, ndead - 2)
    end
    if tonumber(dead[2]) > cut then
      redis.call('ZADD', zkey, string.format('%d', cut), dead[1])
    end
    ndead = 0
  end
end
--#converted
--#plain
if not last then
--#convert
if not last or oldw then
--#converted
  redis.call('ZADD', zkey, '-inf', hdr)
end
if last == rec then
  redis.call('ZREM', zkey, newest[1]) -- one member per instant
end
--#convert
if carried > 0 and rec > now then
  redis.call('ZADD', zkey, string.format('%d', now), string.format('%d', carried)) -- the carried units' own member
end
--#converted
redis.call('ZADD', zkey, string.format('%d', rec), string.format('%d', total))
if gone then
  redis.call('ZREM', zkey, gone)
end
if ndead > 1 then
  local n = ndead - 1
  if n > trim then
    n = trim
  end
  redis.call('ZREMRANGEBYRANK', zkey, 1, n)
end
if rec ~= t then
  redis.call('ZADD', zkey, '-inf', '#M' .. string.format('%d', t)) -- the clock
end
redis.call('PEXPIRE', zkey, ttl + $margin)
local rem = limit - used

--@book
-- As --@commit, for a booking due at act (≥ now; Peek at act admits
-- cost): logged at act, or at t or the newest member when later; the
-- clock is t (Go: Log.Book). The cost need not fit at now.
total = total + cost
if total >= modulus then
  total = total - modulus
end
local rec = act
if t > rec then
  rec = t
end
if last and last > rec then
  rec = last
end
-- The dead members to trim, all but the base: one alone (gone), read
-- with the base, goes by name; more are counted (ndead, with the base).
local ndead, gone = 0, nil
if expired then
--#plain
  if dead and dead[2] and string.byte(dead[2], 1) ~= 35 and not (dead[3] and string.byte(dead[3], 1) ~= 35) then
    gone = dead[2]
  end
  if not gone then
--#convert
  do
--#converted
    ndead = redis.call('ZCOUNT', zkey, '-inf', cutarg) - 1 -- not the header
    if mh then
      ndead = ndead - 1 -- nor the clock
    end
  end
end
used = used + cost
local reset = rec + window - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
--#convert
if wipe == 1 then
  redis.call('DEL', zkey)
elseif wipe == 2 then
  redis.call('HDEL', hkey, ARGV[$id])
end
--#converted
if mh then
  redis.call('ZREM', zkey, mh) -- first: the ranks below count from 1
end
--#convert
if oldw then
  -- Carried over from another window: the new header, and the members
  -- at or before basecut go but for the base, moved to cut at the
  -- latest so that it stays before the window (design §2.6).
  redis.call('ZREM', zkey, head[1]) -- the old header
  if dead and dead[1] then
    if ndead > 1 then
      -- The old header is gone: the dead members are the ranks from 0,
      -- and the last of them (rank ndead - 1) is the base, which stays.
      redis.call('ZREMRANGEBYRANK', zkey, 0, ndead - 2)
    end
    if tonumber(dead[2]) > cut then
      redis.call('ZADD', zkey, string.format('%d', cut), dead[1])
    end
    ndead = 0
  end
end
--#converted
--#plain
if not last then
--#convert
if not last or oldw then
--#converted
  redis.call('ZADD', zkey, '-inf', hdr)
end
if last == rec then
  redis.call('ZREM', zkey, newest[1]) -- one member per instant
end
--#convert
if carried > 0 and rec > now then
  redis.call('ZADD', zkey, string.format('%d', now), string.format('%d', carried)) -- the carried units' own member
end
--#converted
redis.call('ZADD', zkey, string.format('%d', rec), string.format('%d', total))
if gone then
  redis.call('ZREM', zkey, gone)
end
if ndead > 1 then
  local n = ndead - 1
  if n > trim then
    n = trim
  end
  redis.call('ZREMRANGEBYRANK', zkey, 1, n)
end
if rec ~= t then
  redis.call('ZADD', zkey, '-inf', '#M' .. string.format('%d', t)) -- the clock
end
redis.call('PEXPIRE', zkey, ttl + $margin)
local rem = limit - used
if rem < 0 then
  rem = 0
end

--@refund
-- Gives back up to n of the cost in the window at t, newest first (Go:
-- Log.Refund): the members whose count is above what is left go, but the
-- first, which is renamed to what is left when the member before it ends
-- below that. The clock does not move. Then the report, for a cost of 1
-- (decide may have run for another: a cancel's). A state carried from
-- another kind (carried) never gets here: ops.go reports it instead.
-- By key (Go: Log.Refund) nothing while the newest member is after t: a
-- booking not yet due.
if keyed and last and last > t then
  n = 0
end
local left = used
if used > 0 and n >= 1 then
--#convert
  if oldw then
    -- Carried over from another window: rewritten in this one's terms
    -- first (the new header), so that what the refund leaves reads under
    -- this window's header. A refund does not move the clock, so the
    -- members the old header left as possibly forgotten (at or before
    -- the clock less oldw: their predecessors may be gone) must read so
    -- under this one, which counts as forgotten only what is at or before
    -- the clock less this window: the newest of them, the base of the
    -- counts, goes there at the latest, and the ones before it go. The
    -- members after the clock less oldw are known to both headers and
    -- stay where they are, even when this window's cut leaves them out:
    -- a later, wider window counts them, as Go does (Inherit trims only
    -- what is at or before the clock less the writer's window; Refund
    -- trims nothing). An admission, which moves the clock to t, trims at
    -- its cut instead, as Take does.
    if mh then
      redis.call('ZREM', zkey, mh) -- first: the ranks below count from 0; put back below
      mh = nil
    end
    redis.call('ZREM', zkey, head[1]) -- the old header
    local fcutarg = string.format('%d', clock - oldw)
    local fb = redis.call('ZREVRANGEBYSCORE', zkey, fcutarg, '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
    if fb[1] and string.byte(fb[1], 1) ~= 35 then -- 35 is '#'
      local nf = redis.call('ZCOUNT', zkey, '-inf', fcutarg)
      if nf > 1 then
        redis.call('ZREMRANGEBYRANK', zkey, 0, nf - 2)
      end
      if tonumber(fb[2]) > clock - window then
        redis.call('ZADD', zkey, string.format('%d', clock - window), fb[1])
      end
    end
    redis.call('ZADD', zkey, '-inf', hdr)
    oldw = nil
  end
--#converted
  local give = n
  if give > used then
    give = used
  end
  left = used - give
  local keep = total - give
  if keep < 0 then
    keep = keep + modulus
  end
  -- The member: above left, and within give of the newest, since every
  -- member adds at least 1.
  local first = redis.call('ZCOUNT', zkey, '-inf', cutarg)
  local top = redis.call('ZCARD', zkey) - 1
  local lo, hi = top - give + 1, top
  if lo < first then
    lo = first
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local v = tonumber(redis.call('ZRANGE', zkey, mid, mid)[1]) - base
    if v < 0 then
      v = v + modulus
    end
    if v > left then
      hi = mid
    else
      lo = mid + 1
    end
  end
  local prev = 0
  if lo > first then
    prev = tonumber(redis.call('ZRANGE', zkey, lo - 1, lo - 1)[1]) - base
    if prev < 0 then
      prev = prev + modulus
    end
  end
  local m = redis.call('ZRANGE', zkey, lo, lo, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', zkey, lo, '-1')
  -- The newest member left, or none (the header and the clock alone).
  local lastn = nil
  if prev < left then
    redis.call('ZADD', zkey, string.format('%d', tonumber(m[2])), string.format('%d', keep))
    lastn = tonumber(m[2])
  else
    local below = redis.call('ZRANGE', zkey, '-1', '-1', 'WITHSCORES')
    if below[1] and string.byte(below[1], 1) ~= 35 then -- 35 is '#'
      lastn = tonumber(below[2])
    end
  end
  -- The clock member: kept while the clock is not the newest member's.
  local mt = nil
  if lastn and lastn ~= clock then
    mt = '#M' .. string.format('%d', clock)
  end
  if mh and mh ~= mt then
    redis.call('ZREM', zkey, mh)
  end
  if mt and mt ~= mh then
    redis.call('ZADD', zkey, '-inf', mt)
  end
  last = lastn
end
local rem, retry, reset = limit - left, 0, 0
if rem < 0 then
  rem = 0 -- counted under a larger limit
end
if left > 0 then
  reset = last + window - now
  local excess = left + 1 - limit
  if excess > 0 then
    -- As --@report's search, on the members left.
    local first = redis.call('ZCOUNT', zkey, '-inf', cutarg)
    local lo, hi = first, first + excess - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = redis.call('ZRANGE', zkey, mid, mid)
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
    local e = redis.call('ZRANGE', zkey, lo, lo, 'WITHSCORES')
    retry = tonumber(e[2]) + window - now
  end
end

--@unused
-- A booking of bcost due at act, ahead of t, is given back while it is
-- the newest charge: the newest member is at act and holds bcost at least
-- (Go: Log.Unused).
local give = 0
if last and act > t and last == act then
  local own = total
  local m = redis.call('ZRANGE', zkey, '-2', '-2')
  if m[1] and string.byte(m[1], 1) ~= 35 then -- 35 is '#': none before
    own = total - tonumber(m[1])
    if own < 0 then
      own = own + modulus
    end
  end
  if own >= bcost then
    give = bcost
  end
end

--@undo
-- An admission of bcost due at act ≤ now, in the window at t, is given
-- back as if it had never been admitted (Go: Log.Undo): the newest member
-- at act gives bcost back from the end, as a refund does; a member at act
-- that is not the newest and holds bcost of its own loses it, and every
-- later member (at most 1000) its cumulative count lowered by bcost; the
-- member goes when nothing of its own is left, here: give stays 0, since
-- the refund part that give feeds takes from the end, and took says it.
local give = 0
if last and last == act and act > t - window then
  local own = total
  local m = redis.call('ZRANGE', zkey, '-2', '-2')
  if m[1] and string.byte(m[1], 1) ~= 35 then -- 35 is '#': none before
    own = total - tonumber(m[1])
    if own < 0 then
      own = own + modulus
    end
  end
  if own >= bcost then
    give = bcost
  end
elseif last and act > t - window then
  local sat = string.format('%d', act)
  local m = redis.call('ZRANGEBYSCORE', zkey, sat, sat)
  if m[1] and redis.call('ZCOUNT', zkey, '(' .. sat, '+inf') <= 1000 then
    local v = tonumber(m[1])
    local own = v
    local p = redis.call('ZREVRANGEBYSCORE', zkey, '(' .. sat, '-inf', 'LIMIT', '0', '1')
    if p[1] and string.byte(p[1], 1) ~= 35 then
      own = v - tonumber(p[1])
      if own < 0 then
        own = own + modulus
      end
    end
    if own >= bcost then
      local later = redis.call('ZRANGEBYSCORE', zkey, '(' .. sat, '+inf', 'WITHSCORES')
      redis.call('ZREM', zkey, m[1])
      if own > bcost then
        local nv = v - bcost
        if nv < 0 then
          nv = nv + modulus
        end
        redis.call('ZADD', zkey, sat, string.format('%d', nv))
      end
      for i = 1, #later, 2 do
        local nv = tonumber(later[i]) - bcost
        if nv < 0 then
          nv = nv + modulus
        end
        redis.call('ZREM', zkey, later[i])
        redis.call('ZADD', zkey, later[i + 1], string.format('%d', nv))
      end
      total = total - bcost
      if total < 0 then
        total = total + modulus
      end
      took = bcost
    end
  end
end

--@used
-- What a log had used at now (Go: used): the cost of its members after
-- t − window, t being now or the log's clock when later, bookings ahead
-- included, as the log counts it. head is the set's first two members.
local clock = nil
if head[3] and (head[4] == '-inf' or tonumber(head[4]) == -math.huge) then
  local c = string.match(head[3], '^#M(%-?%d+)$')
  if c then
    clock = tonumber(c)
  end
end
local newest = redis.call('ZRANGE', zkey, '-1', '-1', 'WITHSCORES')
used = 0
if newest[1] and string.byte(newest[1], 1) ~= 35 then -- 35 is '#': the header or the clock alone
  local total, last = nil, tonumber(newest[2])
  if string.match(newest[1], '^%d+$') then
    total = tonumber(newest[1])
  end
  used = nil
  if total and total < 4503599627370496 and last and last >= -9007199254740992 and last <= 9007199254740992 and last == math.floor(last) then
    local t = now
    if not clock then
      clock = last
    end
    if clock > t then
      t = clock
    end
    local cut = t - p0
    used = 0
    if last > cut then
      local base = 0
      local dead = redis.call('ZREVRANGEBYSCORE', zkey, string.format('%d', cut), '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
      if dead[1] and string.byte(dead[1], 1) ~= 35 then
        base = nil
        if string.match(dead[1], '^%d+$') then
          base = tonumber(dead[1])
        end
      end
      used = nil
      if base and base < 4503599627370496 then
        used = total - base
        if used < 0 then
          used = used + 4503599627370496
        end
      end
    end
  end
end
