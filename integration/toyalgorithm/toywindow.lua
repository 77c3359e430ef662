-- Toy window (Go: toyWindow, in toy_test.go): a fixed window under a Kind
-- of its own, the dry run of a seventh algorithm defined outside this
-- module's algorithm packages. Its body is the fixed window's, but for
-- this opening comment.
-- Parameters: ARGV[$1] limit, ARGV[$2] window in µs.
-- State: the header "F<limit>,<window>:", then "<window index> <count>", the count a fill pointer
-- from that window (window index+j holds its units [j·limit, (j+1)·limit):
-- above the limit with bookings, never above 2·limit). A clock that stepped back into
-- an earlier window stays in the counted one, unless that window starts
-- more than 2^48 µs (algorithm.MaxDuration) after now's: no clock steps
-- back that far, and such an index is another window length's (a minute's
-- index read as an hour's lies centuries ahead), so the state counts as
-- fresh rather than make every wait that long. A value that is not such a
-- state, or a count above twice its writer's limit (no window books
-- further), is refused with an RLMISMATCH error (or started afresh).
--#setup limit, window
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])
--#setupend

-- The window of now, ⌊now/window⌋, exact for whole numbers below 2^53.
local index = math.floor(now / window)
if index * window > now then
  index = index - 1
elseif (index + 1) * window <= now then
  index = index + 1
end
local nindex = index -- the window of now
local count, lasts = 0, false -- lasts: the key's TTL covers a charge now
--#convert
-- Started from a state of another kind (Go: algorithm.Carry): a fresh
-- state charged what that one had used, at most the limit, at now.
if carried > 0 then
  count = math.min(carried, limit)
end
--#converted
if state then
  local stored, counted
--#parse stored, counted
  stored, counted = string.match(state, '^(%-?%d+) (%d+)$', at)
  stored, counted = tonumber(stored), tonumber(counted)
--#parsed
  local most = 2 * limit -- the count a writer's limit allows
--#convert
  if old0 then
    most = 2 * old0
  end
--#converted
  if stored and counted and stored >= -9007199254740992 and stored <= 9007199254740992 and counted <= most then
--#plain
    lasts = stored == index and counted > 0 and counted <= limit -- its write's TTL lasts to the window's end
--#convert
    if old0 and counted > 0 then
      -- Written under limit old0 and window old1 (design §2.4, §2.8):
      -- the count as the old window reads it at now (none once its window
      -- has ended, or when it lies more than 2^48 µs ahead; of a pointer
      -- booked past the window of now, its part in that window, at most
      -- old0) stays counted (as-is, capped at the limit) or carries as the
      -- fraction of the old limit (proportional, rounded up, capped).
      -- Under another window length it counts in the window of now.
      -- floordiv returns ⌊a/b⌋ for b > 0, exact for whole numbers below
      -- 2^53.
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
      if stored > oi + oahead then
        counted = 0
      elseif stored < oi then
        if stored == oi - 1 and counted > old0 then
          stored, counted = oi, counted - old0
        else
          counted = 0
        end
      end
      local booked = 0 -- counted into the window after stored's
      if counted > old0 then
        booked = counted - old0
        counted = old0
      end
      if old1 ~= window then
        stored = index
      end
      if booked > 0 then
        -- The window stored was full and stays so; what was booked after
        -- it stays counted, limit in each window but the last, as far
        -- ahead as a window is read (⌊2^48/window⌋ past index).
        local nahead = floordiv(281474976710656, window)
        local full = floordiv(booked - 1, limit)
        if full > index + nahead - stored then
          full = index + nahead - stored
        end
        stored = stored + full
        counted = limit + math.min(booked - full * limit, limit)
      elseif counted > 0 and proportional then
        -- ⌈counted·limit/old0⌉ for whole numbers up to 2^40: long
        -- division, 4 bits of limit at a time.
        local q, r = 0, 0
        for shift = 40, 0, -4 do
          local x = r * 16 + counted * (math.floor(limit / 2 ^ shift) % 16)
          local d = math.floor(x / old0)
          if d * old0 > x then
            d = d - 1
          elseif (d + 1) * old0 <= x then
            d = d + 1
          end
          q, r = q * 16 + d, x - d * old0
        end
        if r > 0 then
          q = q + 1
        end
        counted = math.min(q, limit)
      elseif counted > limit then
        counted = limit
      end
    end
--#converted
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
    elseif stored == index - 1 and counted > limit then
      count = counted - limit -- booked into the window of now
    end
  else
--#unreadable ' holds ' .. #state .. ' bytes that are not a fixed window'
  end
end

local ends = (index + 1) * window - now
local fits = count + cost <= limit

--@report
local rem, retry, reset = limit - count, ends, 0
if rem < 0 then
  rem = 0 -- booked ahead
end
if fits then
  retry = 0
elseif count + cost > 2 * limit then
  -- The first window j whose part of the pointer leaves room:
  -- count − j·limit ≤ limit − cost (the quotients below are exact).
  retry = (index + math.floor((count + cost - 1) / limit)) * window - now
end
if count > limit then
  reset = (index + math.floor((count + limit - 1) / limit)) * window - now -- the last window booked
elseif count > 0 then
  reset = ends
end

--@commit
count = count + cost
local ttl = math.ceil(ends / 1000)
if ttl < 2 then
  ttl = 2
end
local rem, reset = limit - count, ends
-- counter: the window's index, when the state counts units of the window
-- of now within the limit, which a counter may keep (--@counter).
local counter = index == nindex and count <= limit and string.format('%d', index) or nil
--#encode index, count
local value = string.format('%d %d', index, count)

--@lean
-- The common case alone, for a booking of this limit alone (the
-- composer's bookLean), on a state as text: a state of this window,
-- within its limit (so the key's TTL lasts, as lasts says above), and a
-- cost of 1 to the limit; lean stays false for
-- anything else, which the whole body decides. Its reply as the state
-- stands (r1, r2, r3) and charged (c1, c2, c3), and the body written when
-- charged (value), made only when it fits outside a dry run (dry). Its
-- body starts at at, after the header (which a booking may have given a
-- generation). The index goes through num (tonumber, remembered): a
-- window's index repeats in its states; a count seldom repeats, and
-- converts directly. A count of more digits than a double holds is nil in
-- some Luas (miniredis's): the whole body refuses it.
local limit, window = tonumber(ARGV[$1]), tonumber(ARGV[$2])
local index, count = string.match(state, '^(%-?%d+) (%d+)$', at)
if index then
  index, count = num(index), tonumber(count)
end
if index and count and count > 0 and count <= limit and cost >= 1 and cost <= limit and not peek and
  index * window <= now and now < (index + 1) * window then
  lean = true
  local ends = (index + 1) * window - now
  fits = count + cost <= limit
  r1, r2, r3 = limit - count, fits and 0 or ends, ends
  c1, c2, c3 = limit - count - cost, 0, ends
  if fits and not dry then
    value = string.format('%d %d', index, count + cost)
  end
end

--@counter
-- The common case alone, for a multi script and a plain decision, on a
-- state the whole body kept as a counter (docs/design/counter-window.md):
-- the count of the window of now in the hash's field cfield (the ID, a
-- brace, the header, the index), where the ID's field holds "<index> *".
-- A cost of 1 to the limit outside a peek: charged with one HINCRBY when
-- charge, else read; a charge that does not fit is given back at once,
-- unless the window was full (a count past the limit reads as the limit,
-- so a full window's refusal is one command). lean stays false without a
-- counter (an HINCRBY's new field is removed at once) or with anything but
-- a positive count in it (given back): the whole body decides. Else it
-- sets fits, charged (the counter holds the charge), rem (remaining,
-- charged or not) and ends (µs to the window's end: reset; retry if it
-- does not fit). costarg: the cost as sent; idx: %d of an index, remembered.
local limit, window = num(ARGV[$1]), num(ARGV[$2])
if cost >= 1 and cost <= limit and not peek then
  local index = math.floor(now / window)
  if index * window > now then
    index = index - 1
  elseif (index + 1) * window <= now then
    index = index + 1
  end
  cfield = $cpre .. idx(index)
  local c
  if charge then
    c = redis.pcall('HINCRBY', hkey, cfield, costarg)
    if c == cost then
      redis.call('HDEL', hkey, cfield) -- there was none
    end
  else
    c = redis.pcall('HGET', hkey, cfield)
    c = type(c) == 'string' and tonumber(c)
    c = c and c + cost
  end
  if type(c) == 'number' and c > cost then
    lean, fits, ends = true, c <= limit, (index + 1) * window - now
    charged = charge and fits
    if charged then
      rem = limit - c
    elseif c - cost < limit then
      rem = limit - c + cost
      if charge then
        redis.call('HINCRBY', hkey, cfield, -cost) -- given back: the window was not full
      end
    else
      rem = 0
    end
  elseif charge and type(c) == 'number' and c ~= cost then
    redis.call('HINCRBY', hkey, cfield, -cost) -- not a count the lean part reads
  end
end

--@book
-- The booking of cost due at act, in the window of act, index+j: the
-- pointer becomes max(count, j·limit) + cost; one that passes whole
-- windows moves the index to the window before the booked one.
local bindex = math.floor(act / window)
if bindex * window > act then
  bindex = bindex - 1
elseif (bindex + 1) * window <= act then
  bindex = bindex + 1
end
local j = bindex - index
local bcount = count + cost
bindex = index
if j > 1 or (j == 1 and count < limit) then
  bindex, bcount = index + j - 1, limit + cost
end
local reset = (bindex + 1) * window - now
if bcount > limit then
  reset = (bindex + math.floor((bcount + limit - 1) / limit)) * window - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%d %d', bindex, bcount)
local rem = limit - bcount
if rem < 0 then
  rem = 0
end

--@refund
-- Up to n of the pointer at now given back, the latest booked first. By
-- key (Go: Window.Refund) nothing while something is booked past the
-- window of now (a pointer above the limit, or in a later window).
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
if count > 0 then
  local c = count - n
  if c < 0 then
    c = 0
  end
  gave = count - c
  if c == 0 and index > nindex then
    index, c = index - 1, limit -- the window before the index keeps its units (Go: give)
  end
  if n > 0 then
    value = string.format('%d %d', index, c)
  end
  rem = limit - c
  if rem < 0 then
    rem = 0
  end
  if c + 1 > limit then
    retry = (index + math.floor(c / limit)) * window - now
  end
  if c > limit then
    reset = (index + math.floor((c + limit - 1) / limit)) * window - now
  elseif c > 0 then
    reset = (index + 1) * window - now
  end
  ttl = math.ceil(reset / 1000)
  if ttl < 2 then
    ttl = 2
  end
end

--@undo
-- What an admission of bcost due at act ≤ now gives back (Go:
-- Window.Undo): all of it when act lies in the window of now and nothing
-- is booked past that window; nothing once that window has ended.
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
if aindex == nindex and index == nindex and count <= limit then
  give = bcost
end

--@owe
-- n more charged into the window of max(now, act) (Go: Window.Owe), as a
-- booking is, whether or not it has room: past a window's limit into the
-- next, a debt. One that passes whole windows moves the index on, the
-- pointer within 2·limit; cut where the index would lie more than 2^48 µs
-- after now's window.
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end
local j = fdiv(math.max(now, act), window) - index
if j <= 0 or (j == 1 and count >= limit) then
  count = count + n
else
  index, count = index + j - 1, limit + n
end
if count > 2 * limit then
  local k = fdiv(count - limit - 1, limit)
  local most = fdiv(now, window) + fdiv(281474976710656, window) - 1 - index
  if k > most then
    k = math.max(most, 0)
    count = 2 * limit + k * limit
  end
  index, count = index + k, count - k * limit
end
local reset = (index + 1) * window - now
if count > limit then
  reset = (index + fdiv(count + limit - 1, limit)) * window - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%d %d', index, count)

--@used
-- What a window's state had used at now (Go: used): the fill pointer of
-- the window of now as the window reads it (units booked past its end
-- included), 0 once the counted window has ended.
local i, c = string.match(fv, '^(%-?%d+) (%d+)$', at)
if i then
  i, c = tonumber(i), tonumber(c)
end
if p0 <= 1099511627776 and i and c and i >= -9007199254740992 and i <= 9007199254740992 and c <= 2 * p0 then
  local function fdiv(a, b)
    local q = math.floor(a / b)
    if q * b > a then
      q = q - 1
    elseif (q + 1) * b <= a then
      q = q + 1
    end
    return q
  end
  local index = fdiv(now, p1)
  used = 0
  if c == 0 or i > index + fdiv(281474976710656, p1) then
    used = 0
  elseif i >= index then
    used = c
  elseif i == index - 1 and c > p0 then
    used = c - p0
  end
end
