-- In-flight limit (Go: concurrency.Slots).
-- Parameters: ARGV[$1] limit, ARGV[$2] lease in µs.
-- State: a sorted set with one member per unit held, scored by the
-- instant it was admitted at, named "<instant>:<index>", the index (5
-- digits, from 00001) counting the units of that instant, so that a hold
-- is found by its instant, and the units of one instant are the indexes 1
-- to their count: a release takes the highest ones, and an admission adds
-- after them. A unit counts while its instant is after now − lease
-- (members ahead of now, booked, included); the units held are a ZCOUNT.
-- Every command is O(log n) in the members n, but the trim of the units
-- whose lease has ended, which an admission bounds to 1000, and the units
-- a request adds or gives back. The set's first member is its header,
-- "#C<lease µs>" at score -inf. A key of another type, or a newest member
-- that is not of this format, is refused with an RLMISMATCH error, never
-- misread (or started afresh).
--#setup limit, lease, trim
local limit = tonumber(ARGV[$1])
local lease = tonumber(ARGV[$2])
local trim = 1000
--#setupend

-- The units counted are those after cut: now − lease, or, for a set held
-- under another lease (old0), now − old0 when that is later, since a
-- hold whose lease had ended under it stays ended (Go: Inherit).
local cut = now - lease
--#convert
if old0 and now - old0 > cut then
  cut = now - old0
end
--#converted
local cutarg = string.format('%d', cut)
local inuse, newest = 0, nil
if state then
  local top = redis.call('ZRANGE', zkey, '-1', '-1', 'WITHSCORES')
  if top[1] and top[1] ~= head[1] then
    newest = tonumber(top[2])
    if not (newest and newest == math.floor(newest) and newest >= -9007199254740992 and newest <= 9007199254740992 and
        string.match(top[1], '^%-?%d+:%d%d%d%d%d$')) then
--#unreadable ' holds a member that is not of an in-flight limit'
--#convert
      wipe, newest = 1, nil
--#converted
    elseif newest > cut then
      inuse = redis.call('ZCOUNT', zkey, '(' .. cutarg, '+inf')
    end
  end
end
--#convert
if carried > 0 then
  -- Started afresh from another kind's state: what it had used stands
  -- for units held from now (Go: algorithm.Carry), which an admission
  -- writes with its own.
  carried = math.min(carried, limit)
  inuse, newest = carried, now
end
--#converted

local fits = inuse + cost <= limit

--@report
local rem, retry, reset = limit - inuse, 0, 0
if rem < 0 then
  rem = 0 -- held under a larger limit
end
if inuse > 0 then
  reset = newest + lease - now
  local excess = inuse + cost - limit
  if excess > 0 then
    -- The excess-th oldest unit counted: once its lease ends, the cost
    -- fits, if nobody releases first. Ranks count the header and the
    -- units no longer counted before it. Carried units alone have no
    -- member: they end together, at reset; so do the units carried from
    -- another kind's set, whose members (not state) are no units.
    retry = reset
    if state then
      local first = redis.call('ZCOUNT', zkey, '-inf', cutarg)
      local e = redis.call('ZRANGE', zkey, first + excess - 1, first + excess - 1, 'WITHSCORES')
      if e[2] and string.byte(e[1], 1) ~= 35 then -- 35 is '#'
        retry = tonumber(e[2]) + lease - now
      end
    end
    if retry < 1 then
      retry = 1
    end
  end
end

--@commit
-- Trims the units no longer counted (at most trim of them: the others
-- are not counted, and go with a later admission), then holds cost units
-- at now, after those of now already held.
local ndead = 0
if state and newest then
  ndead = redis.call('ZCOUNT', zkey, '-inf', cutarg) - 1 -- not the header
end
--#convert
if wipe == 1 then
  redis.call('DEL', zkey)
elseif wipe == 2 then
  redis.call('HDEL', hkey, ARGV[$id])
end
if old0 then
  -- Held under another lease: the new header, and every unit no longer
  -- counted goes now, so that a longer lease does not count them again.
  redis.call('ZREM', zkey, head[1])
  redis.call('ZREMRANGEBYSCORE', zkey, '-inf', cutarg)
  ndead = 0
end
--#converted
if ndead > 0 then
  redis.call('ZREMRANGEBYRANK', zkey, 1, math.min(ndead, trim))
end
redis.call('ZADD', zkey, '-inf', hdr)
local add = cost
--#convert
add = add + carried
--#converted
local sat = string.format('%d', now)
local k = redis.call('ZCOUNT', zkey, sat, sat)
for i = k + 1, k + add, 1000 do
  local args = {}
  for j = i, math.min(i + 999, k + add) do
    args[#args + 1] = sat
    args[#args + 1] = string.format('%s:%05d', sat, j)
  end
  redis.call('ZADD', zkey, unpack(args))
end
inuse = inuse + cost
local last = now
if newest and newest > last then
  last = newest
end
local reset = last + lease - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('PEXPIRE', zkey, ttl + $margin)
local rem = limit - inuse
if rem < 0 then
  rem = 0
end

--@book
-- As --@commit, for a booking due at act (≥ now; Peek at act admits
-- cost): the units are held at act, after those of act already held, and
-- count from now on (Go: Slots.Book).
local ndead = 0
if state and newest then
  ndead = redis.call('ZCOUNT', zkey, '-inf', cutarg) - 1 -- not the header
end
--#convert
if wipe == 1 then
  redis.call('DEL', zkey)
elseif wipe == 2 then
  redis.call('HDEL', hkey, ARGV[$id])
end
if old0 then
  redis.call('ZREM', zkey, head[1])
  redis.call('ZREMRANGEBYSCORE', zkey, '-inf', cutarg)
  ndead = 0
end
if carried > 0 then
  local sn = string.format('%d', now)
  local kn = redis.call('ZCOUNT', zkey, sn, sn)
  for j = kn + 1, kn + carried do
    redis.call('ZADD', zkey, sn, string.format('%s:%05d', sn, j))
  end
end
--#converted
if ndead > 0 then
  redis.call('ZREMRANGEBYRANK', zkey, 1, math.min(ndead, trim))
end
redis.call('ZADD', zkey, '-inf', hdr)
local sat = string.format('%d', act)
local k = redis.call('ZCOUNT', zkey, sat, sat)
for i = k + 1, k + cost, 1000 do
  local args = {}
  for j = i, math.min(i + 999, k + cost) do
    args[#args + 1] = sat
    args[#args + 1] = string.format('%s:%05d', sat, j)
  end
  redis.call('ZADD', zkey, unpack(args))
end
inuse = inuse + cost
local last = act
if newest and newest > last then
  last = newest
end
local reset = last + lease - now
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
redis.call('PEXPIRE', zkey, ttl + $margin)
local rem = limit - inuse
if rem < 0 then
  rem = 0
end

--@refund
-- By key (keyed): gives back up to n of the units held, newest first
-- (the highest ranks: within an instant, the highest indexes), nothing
-- while the newest is ahead of now, a booking not yet due (Go:
-- Slots.Refund). Through a handle, the --@unused or --@undo part has
-- taken the hold's own units out already: this reports. Then the report
-- for a cost of 1.
if keyed and inuse > 0 and n >= 1 and newest <= now then
  local give = math.min(n, inuse)
  redis.call('ZREMRANGEBYRANK', zkey, -give, -1)
end
if state then
  inuse = redis.call('ZCOUNT', zkey, '(' .. cutarg, '+inf')
  newest = nil
  local top = redis.call('ZRANGE', zkey, '-1', '-1', 'WITHSCORES')
  if top[1] and string.byte(top[1], 1) ~= 35 then -- 35 is '#'
    newest = tonumber(top[2])
  end
  -- The header alone stays, with its generation, until the key expires:
  -- the state is still the one its bookings charged, as in memory, so a
  -- reservation's later cancel or undo reads it as its own.
end
local rem, retry, reset = limit - inuse, 0, 0
if rem < 0 then
  rem = 0
end
if inuse > 0 then
  reset = newest + lease - now
  local excess = inuse + 1 - limit
  if excess > 0 then
    -- As --@report's search.
    retry = reset
    local first = redis.call('ZCOUNT', zkey, '-inf', cutarg)
    local e = redis.call('ZRANGE', zkey, first + excess - 1, first + excess - 1, 'WITHSCORES')
    if e[2] and string.byte(e[1], 1) ~= 35 then -- 35 is '#'
      retry = tonumber(e[2]) + lease - now
    end
    if retry < 1 then
      retry = 1
    end
  end
end

--@unused
-- A booking of bcost due at act, ahead of now: its own units, up to
-- bcost, the highest indexes of act, are taken out here; holds admitted
-- since do not depend on it (Go: Slots.Unused).
local give = 0
if state and newest then
  local sat = string.format('%d', act)
  local k = redis.call('ZCOUNT', zkey, sat, sat)
  give = math.min(bcost, k)
  for j = k - give + 1, k do
    redis.call('ZREM', zkey, string.format('%s:%05d', sat, j))
  end
end

--@undo
-- A hold of bcost admitted at act ≤ now, whose lease has not ended: its
-- own units, up to bcost, the highest indexes of act, are taken out here,
-- as if it had never been admitted; nothing once its lease has ended, so
-- that a late release frees nothing another holds (Go: Slots.Undo). The
-- part takes them itself: give stays 0, since the refund part that give
-- feeds takes from the end, and took says how many it took.
local give = 0
if state and newest and act > cut then
  local sat = string.format('%d', act)
  local k = redis.call('ZCOUNT', zkey, sat, sat)
  took = math.min(bcost, k)
  for j = k - took + 1, k do
    redis.call('ZREM', zkey, string.format('%s:%05d', sat, j))
  end
end

--@used
-- What an in-flight limit held at now (Go: used): its units after now −
-- lease, lease = p0, those ahead included.
used = redis.call('ZCOUNT', zkey, '(' .. string.format('%d', now - p0), '+inf')
