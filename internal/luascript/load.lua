-- The load of a state kept in the key's hash (hkey), field ARGV[$id]; the
-- composer puts it before the body of each of the five string-state
-- algorithms. In a script of several such limits, the composer replaces
-- its HGET by the limit's value in the reply of the script's one HMGET of
-- all their fields (hv; an error reply, WRONGTYPE, stands for every
-- field, as HGET's would). It writes nothing, and leaves:
--   state   the field's value when the body may read it, else nil (fresh)
--   at      where the body starts in state, after the header
--   old0, old1  the writer's meaning parameters when its header is of
--           the reader's Kind with other parameters (inherit), else nil
--   wipe    what an admission must remove first when the state was
--           started afresh: 1 the key (not a hash), 2 the sorted set of
--           the same ID (a sliding log's), else nil
--   afresh  whether a state the body cannot read starts afresh (mode 2, 3)
--           instead of failing with an RLMISMATCH error
--   carried what a state of another kind, started afresh, had used
--           (used.lua, Go: algorithm.Used), else 0: the body's fresh
--           state starts charged with it, at most its limit
--   other   whether the field held another kind's state (fv) or the ID a
--           log's sorted set (fz), started afresh: a booking on it is not
--           undone exactly (ops.go), as Go's memory store does not
-- and sets the script's held (declared by its head) when the field was
-- there: the key then has a TTL, which every write of a field sets, so
-- the write extends it with PEXPIRE GT alone (store.lua). A batch knows
-- held from its head's read, and drops the line: its later requests read
-- what the ones before wrote, which Redis does not hold yet.
local state, at, old0, old1, wipe, carried, other = nil, 1, nil, nil, nil, 0, false
local afresh = ARGV[$mode] >= '2'
do
  local hdr = ARGV[$hdr]
  local v = redis.pcall('HGET', hkey, ARGV[$id])
  local bad, fv, fz = nil, nil, false
  if type(v) == 'table' then
    bad, wipe = 'is not a hash', 1
  elseif v then
    held = true
    if string.find(v, hdr, 1, true) == 1 then
      state, at = v, #hdr + 1
    else
      local _, e, k, p0, p1 = string.find(v, '^(%u)(%d+),?(%d*):')
      if k then -- not tonumber(nil): miniredis's Lua raises an error
        p0, p1 = tonumber(p0), tonumber(p1)
      end
      if k and k == string.sub(hdr, 1, 1) and p0 and p0 >= 1 and p0 <= 1099511627776 and
          (p1 == nil) == (string.find(hdr, ',', 1, true) == nil) and (p1 == nil or (p1 >= 1 and p1 <= 281474976710656)) then
        state, at, old0, old1 = v, e + 1, p0, p1
      elseif k then
        bad, fv = 'holds ' .. string.sub(v, 1, e), v
      else
        bad = 'holds a value of no known format'
      end
    end
  elseif redis.pcall('EXISTS', $zkey) == 1 then -- undeclared: mid-migration it may be elsewhere, and read as missing
    bad, wipe, fz = 'has a sorted set (a sliding log) ' .. $zkey, 2, true
  end
  if bad then
    if not afresh then
      return redis.error_reply('RLMISMATCH ' .. hkey .. ' field ' .. ARGV[$id] .. ' ' .. bad .. ', not ' .. hdr)
    end
    state = nil
    if fv or fz then
      other = true
--#used
    end
  end
end
