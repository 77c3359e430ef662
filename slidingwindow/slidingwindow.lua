-- Sliding-window counter (Go: slidingwindow.Window).
-- Parameters: ARGV[$1] limit, ARGV[$2] window in µs.
-- State: the header "S<limit>,<window>:", then "<window index> <count>
-- <previous count>": the cost
-- admitted in the window of that index and in the one before, the count a
-- fill pointer (window index+j holds its units [j·limit, (j+1)·limit):
-- above the limit with bookings, never above 2·limit; a larger count, only
-- an earlier release's as-is state from a larger limit, is read as
-- 2·limit). The cost in
-- the rolling window ending now is estimated as
--   count + ⌈previous × (window − elapsed) / window⌉,
-- elapsed being the time since the current window started (0 when a clock
-- that stepped back is still in an earlier window, which counts in the
-- current one), unless that window starts more than 2^48 µs
-- (algorithm.MaxDuration) after now's: no clock steps back that far, and
-- such an index is another window length's, so the state counts as fresh
-- rather than make every wait that long. The count is at most 2^41 and
-- the previous count 2^40 (no limit is larger); a value that is not such a
-- state is refused with an RLMISMATCH error (or started afresh).
--#setup limit, window, muldiv
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])
-- muldiv(a, b, c): ⌊a·b/c⌋ and the remainder, exact for whole numbers
-- 0 ≤ a ≤ 2^40, 0 ≤ b ≤ 2^48 and 1 ≤ c ≤ 2^48 (the quotients needed are
-- below 2^49). A product below 2^53 is exact as it is; a larger one (up to
-- 2^88) is divided by long division, 4 bits of b at a time, so that every
-- intermediate stays below 2^53. Each ⌊x/c⌋ of doubles is off by at most
-- one and corrected. Go gets the same numbers from 128-bit arithmetic.
local function muldiv(a, b, c)
  local p = a * b
  if p < 9007199254740992 then
    local q = math.floor(p / c)
    if q * c > p then
      q = q - 1
    elseif (q + 1) * c <= p then
      q = q + 1
    end
    return q, p - q * c
  end
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
  return q, r
end
--#setupend

-- The window of now, ⌊now/window⌋, exact for whole numbers below 2^53.
local index = math.floor(now / window)
if index * window > now then
  index = index - 1
elseif (index + 1) * window <= now then
  index = index + 1
end

local count, prev = 0, 0
--#convert
-- Started from a state of another kind (Go: algorithm.Carry): a fresh
-- state charged what that one had used, at most the limit, at now.
if carried > 0 then
  count = math.min(carried, limit)
end
--#converted
if state then
  local i, c, p
--#parse i, c, p
  i, c, p = string.match(state, '^(%-?%d+) (%d+) (%d+)$', at)
  i, c, p = tonumber(i), tonumber(c), tonumber(p)
--#parsed
  if i and c and p and i >= -9007199254740992 and i <= 9007199254740992 and c <= 2199023255552 and p <= 1099511627776 then
    local most = 2 * limit -- the count a writer's limit allows
--#convert
    if old0 then
      most = 2 * old0
    end
--#converted
    if c > most then
      c = most
    end
--#convert
    if old0 then
      -- Written under limit old0 and window old1 (design §2.5, §2.8): the
      -- state as the old counter reads it at now, of its count only the
      -- part in the window of now (at most old0). Under the same window
      -- the counts stay as they are (as-is; a count above the limit moves
      -- to the previous count of the next window, the same estimate), or
      -- carry as fractions of the old limit (proportional, rounded up,
      -- capped); under another, the old window's estimate at now becomes
      -- one count in the window of now, capped (as-is) or carried as a
      -- fraction (proportional).
      local prop = proportional
      -- floordiv returns ⌊a/b⌋ for b > 0, exact for whole numbers below
      -- 2^53 (defined here, off the fast path).
      local function floordiv(a, b)
        local q = math.floor(a / b)
        if q * b > a then
          q = q - 1
        elseif (q + 1) * b <= a then
          q = q + 1
        end
        return q
      end
      local oi, oahead = floordiv(now, old1), floordiv(281474976710656, old1)
      local ox, oc, op = oi, 0, 0
      if (c > 0 or p > 0) and i <= oi + oahead then
        if i >= oi then
          ox, oc, op = i, c, p
        elseif i == oi - 1 then
          oc, op = math.max(c - old0, 0), math.min(c, old0)
        elseif i == oi - 2 and c > old0 then
          op = math.min(c - old0, old0)
        end
      end
      local booked = 0 -- counted into the window after ox
      if oc > old0 then
        booked = oc - old0
        oc = old0
      end
      -- scaled returns ⌈x·limit/old0⌉, at most limit: a count carried as
      -- the fraction of the old limit it used (proportional), rounded up.
      local function scaled(x)
        local q, r = muldiv(x, limit, old0)
        if r > 0 then
          q = q + 1
        end
        return math.min(q, limit)
      end
      if booked > 0 then
        -- The window was full and stays so (ox's under the same window,
        -- else index's with nothing before it); what was booked after it
        -- stays counted, limit in each window but the last, as far ahead
        -- as a window is read (⌊2^48/window⌋ past index).
        local base, bp = index, 0
        if old1 == window then
          base, bp = ox, op
          if prop then
            bp = scaled(op)
          end
        end
        local nahead = floordiv(281474976710656, window)
        -- One by one, this counter books limit − 1 units in each window
        -- after a full one, and a limit of 1 one every two windows.
        local full, rest = 2 * booked - 1, 1
        if limit > 1 then
          local per = limit - 1
          full = floordiv(booked - 1, per)
          rest = booked - full * per
        end
        if full > index + nahead - base then
          full, rest = index + nahead - base, limit
        end
        if full > 0 then
          bp = limit
        end
        i, c, p = base + full, limit + rest, bp
      elseif old1 ~= window then
        local u = oc
        if op > 0 then
          local el = now - ox * old1
          if el < 0 then
            el = 0
          end
          local q, r = muldiv(op, old1 - el, old1)
          if r > 0 then
            q = q + 1
          end
          u = oc + q
        end
        i, c, p = index, math.min(u, limit), 0
        if prop then
          c = scaled(u)
        end
      elseif prop then
        i, c, p = ox, scaled(oc), scaled(op)
      elseif oc <= limit then
        i, c, p = ox, oc, op
      elseif ox < index + oahead then
        i, c, p = ox + 1, 0, oc
      else
        i, c, p = ox, limit, op
      end
    end
--#converted
    local ahead = 1 -- at least: ⌊2^48/window⌋ ≥ 1
    if i > index + 1 then
      -- ⌊2^48/window⌋, the most windows a counted one may lie ahead,
      -- computed only past the next window.
      ahead = math.floor(281474976710656 / window)
      if ahead * window > 281474976710656 then
        ahead = ahead - 1
      elseif (ahead + 1) * window <= 281474976710656 then
        ahead = ahead + 1
      end
    end
    if (c > 0 or p > 0) and i <= index + ahead then
      if i >= index then
        index, count, prev = i, c, p
      elseif i == index - 1 then
        count, prev = math.max(c - limit, 0), math.min(c, limit)
      elseif i == index - 2 and c > limit then
        prev = math.min(c - limit, limit)
      end
    end
  else
--#unreadable ' holds ' .. #state .. ' bytes that are not a sliding-window counter'
  end
end
local start = index * window
local elapsed = now - start
if elapsed < 0 then
  elapsed = 0
end

local used = count
if prev > 0 then
  local q, r = muldiv(prev, window - elapsed, window)
  if r > 0 then
    q = q + 1
  end
  used = count + q
end

local fits = used + cost <= limit

--@report
local rem, retry, reset = limit - used, 0, 0
if rem < 0 then
  rem = 0
end
if count > limit then
  -- booked ahead: the last window it reaches weighs two windows
  reset = start + (math.floor((count + limit - 1) / limit) + 1) * window - now
elseif count > 0 then
  reset = start + 2 * window - now
elseif prev > 0 then
  reset = start + window - now
end
if used + cost > limit then
  -- The cost fits once the previous window's share is at most what the
  -- count leaves, or, when the count leaves nothing, in the first window
  -- j whose part of the pointer does (count − j·limit ≤ limit − cost),
  -- once the part of the window before weighs little enough.
  local a = limit - count - cost
  if a >= 0 then
    retry = start + window - muldiv(a, window, prev) - now
  elseif count + cost <= 2 * limit then
    retry = start + 2 * window - muldiv(limit - math.max(count - limit, 0) - cost, window, math.min(count, limit)) - now
  else
    local j = math.floor((count + cost - 1) / limit)
    local part = count - (j - 1) * limit
    retry = start + (j + 1) * window - muldiv(limit - math.max(part - limit, 0) - cost, window, math.min(part, limit)) - now
  end
end

--@commit
count = count + cost
local reset = start + 2 * window - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local rem = limit - used - cost
--#encode index, count, prev
local value = string.format('%d %d %d', index, count, prev)

--@book
-- The booking of cost due at act, in the window of act, index+j: the
-- pointer becomes max(count, j·limit) + cost; one that passes whole
-- windows moves the index to the window before the booked one, whose
-- previous window then counts as full.
local bindex = math.floor(act / window)
if bindex * window > act then
  bindex = bindex - 1
elseif (bindex + 1) * window <= act then
  bindex = bindex + 1
end
local j = bindex - index
local bcount, bprev = count + cost, prev
bindex = index
if j > 1 then
  bindex, bcount, bprev = index + j - 1, limit + cost, limit
elseif j == 1 and count < limit then
  bcount = limit + cost
end
local bstart = bindex * window
local bused = bcount
if bprev > 0 then
  local el = now - bstart
  if el < 0 then
    el = 0
  end
  local q, r = muldiv(bprev, window - el, window)
  if r > 0 then
    q = q + 1
  end
  bused = bcount + q
end
local rem = limit - bused
if rem < 0 then
  rem = 0
end
local reset = bstart + 2 * window - now
if bcount > limit then
  reset = bstart + (math.floor((bcount + limit - 1) / limit) + 1) * window - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%d %d %d', bindex, bcount, bprev)

--@refund
-- Up to n given back, the latest first: from the count (the pointer),
-- then from the previous window's count. By key (Go: Window.Refund)
-- nothing while something is booked past the window of now (a pointer
-- above the limit, or in a later window).
if keyed then
local nindex = math.floor(now / window)
  if nindex * window > now then
    nindex = nindex - 1
  elseif (nindex + 1) * window <= now then
    nindex = nindex + 1
  end
  if index ~= nindex or count > limit then
    n = 0
  end
end
local value, ttl, rem, retry, reset, gave = nil, 2, limit, 0, 0, 0 -- gave: how many it gave back
if count > 0 or prev > 0 then
  local c = math.min(n, count)
  local rc, rp = count - c, prev - math.min(n - c, prev)
  gave = c + prev - rp
  local rused = rc
  if rp > 0 then
    local q, r = muldiv(rp, window - elapsed, window)
    if r > 0 then
      q = q + 1
    end
    rused = rc + q
  end
  rem = limit - rused
  if rem < 0 then
    rem = 0
  end
  if rc > limit then
    reset = start + (math.floor((rc + limit - 1) / limit) + 1) * window - now
  elseif rc > 0 then
    reset = start + 2 * window - now
  elseif rp > 0 then
    reset = start + window - now
  end
  if rused + 1 > limit then
    local a = limit - rc - 1
    if a >= 0 then
      retry = start + window - muldiv(a, window, rp) - now
    elseif rc + 1 <= 2 * limit then
      retry = start + 2 * window - muldiv(limit - math.max(rc - limit, 0) - 1, window, math.min(rc, limit)) - now
    else
      local j = math.floor(rc / limit)
      local part = rc - (j - 1) * limit
      retry = start + (j + 1) * window - muldiv(limit - math.max(part - limit, 0) - 1, window, math.min(part, limit)) - now
    end
  end
  ttl = math.ceil(reset / 1000)
  if ttl < 2 then
    ttl = 2
  end
  if n > 0 then
    value = string.format('%d %d %d', index, rc, rp)
  end
end

--@undo
-- What an admission of bcost due at act ≤ now gives back (Go:
-- Window.Undo): when nothing is booked past the window of now, all of it
-- when act lies in that window, or in the one before while the window of
-- now has counted nothing; otherwise nothing.
local nindex = math.floor(now / window)
if nindex * window > now then
  nindex = nindex - 1
elseif (nindex + 1) * window <= now then
  nindex = nindex + 1
end
local aindex = math.floor(act / window)
if aindex * window > act then
  aindex = aindex - 1
elseif (aindex + 1) * window <= act then
  aindex = aindex + 1
end
local give = 0
if index == nindex and count <= limit then
  if aindex == nindex or (aindex == nindex - 1 and count == 0) then
    give = bcost
  end
end

--@used
-- What a counter's state had used at now (Go: used): its estimate at now,
-- the count plus the previous window's share, rounded up, as it decides.
local i, c, p = string.match(fv, '^(%-?%d+) (%d+) (%d+)$', at)
if i then
  i, c, p = tonumber(i), tonumber(c), tonumber(p)
end
if p0 <= 1099511627776 and i and c and p and i >= -9007199254740992 and i <= 9007199254740992 and c <= 2199023255552 and p <= 1099511627776 then
  local function fdiv(a, b)
    local q = math.floor(a / b)
    if q * b > a then
      q = q - 1
    elseif (q + 1) * b <= a then
      q = q + 1
    end
    return q
  end
  if c > 2 * p0 then
    c = 2 * p0
  end
  local index = fdiv(now, p1)
  local count, prev = 0, 0
  if (c == 0 and p == 0) or i > index + fdiv(281474976710656, p1) then
    count = 0
  elseif i >= index then
    index, count, prev = i, c, p
  elseif i == index - 1 then
    count, prev = math.max(c - p0, 0), math.min(c, p0)
  elseif i == index - 2 and c > p0 then
    prev = math.min(c - p0, p0)
  end
  used = count
  if prev > 0 then
    local el = now - index * p1
    if el < 0 then
      el = 0
    end
    -- ⌈prev·(p1 − el)/p1⌉ for prev ≤ 2^40 and p1 ≤ 2^48: exact below
    -- 2^53, else long division, 4 bits at a time.
    local a, b = prev, p1 - el
    local q, r
    if a * b < 9007199254740992 then
      q = fdiv(a * b, p1)
      r = a * b - q * p1
    else
      q, r = 0, 0
      for shift = 48, 0, -4 do
        local x = r * 16 + a * (math.floor(b / 2 ^ shift) % 16)
        local d = fdiv(x, p1)
        q, r = q * 16 + d, x - d * p1
      end
    end
    if r > 0 then
      q = q + 1
    end
    used = count + q
  end
end
