--@load
-- Its state, as the conversion script reads it: the field of its state ID
-- in the key's hash. A state of its own header is read as it is; one of
-- its own kind under other parameters (old0, old1, the writer's) is
-- carried by the body's rule (proportional or as-is); anything else is
-- refused with an RLMISMATCH error before anything is written, or, when
-- the limit resets on mismatch (afresh), started afresh: charged with what
-- another kind's state had used (carried, Go: algorithm.Used), an admission
-- removing first what is in the way (wipe: 1 the key, 2 the ID's sorted
-- set). other: the state was another kind's, so that a booking on it is
-- not undone exactly.
local state, at, old0, old1, wipe, carried, other = nil, 1, nil, nil, nil, 0, false
local afresh, proportional = $afresh, $proportional
-- shdr: the header it writes, with the state's generation (hash.lua),
-- which a conversion keeps.
local shdr = ARGV[$hdr]
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
      local _, e, k, p0, p1, g = string.find(v, '^(%u)(%d+),?(%d*)(;?%w*):')
      if k and g ~= '' and string.byte(g, 1) ~= 59 then
        k = nil -- 59 is ';': a generation opens with it
      end
      local base = k and string.sub(v, 1, e - #g - 1) .. ':'
      if k then -- not tonumber(nil): miniredis's Lua raises an error
        p0, p1 = tonumber(p0), tonumber(p1)
      end
      if k and base == hdr then
        state, at, shdr = v, e + 1, string.sub(v, 1, e)
      elseif k and k == string.sub(hdr, 1, 1) and p0 and p0 >= 1 and p0 <= 1099511627776 and
          (p1 == nil) == (string.find(hdr, ',', 1, true) == nil) and (p1 == nil or (p1 >= 1 and p1 <= 281474976710656)) then
        state, at, old0, old1, shdr = v, e + 1, p0, p1, string.sub(hdr, 1, -2) .. g .. ':'
      elseif k then
        -- Another kind's state, carried (what it had used) whatever
        -- the limit's mode; one of its own kind it cannot read only when
        -- it starts afresh.
        bad = 'holds ' .. base
        if k ~= string.sub(hdr, 1, 1) or afresh then
          fv = v
        end
      else
        bad = 'holds a value of no known format'
      end
    end
  elseif redis.pcall('EXISTS', $zkey) == 1 then -- undeclared: mid-migration it may be elsewhere, and read as missing
    bad, wipe, fz = 'has a sorted set ' .. $zkey, 2, true
  end
  if bad then
    if not afresh and not (fv or fz) then
      return redis.error_reply('RLMISMATCH ' .. hkey .. ' field ' .. ARGV[$id] .. ' ' .. bad .. ', not ' .. hdr)
    end
    state = nil
    if fv or fz then
      other = true
      carried = usedOf(fv, fz, $zkey, now, afresh)
      if carried == false then
        return redis.error_reply('RLMISMATCH ' .. hkey .. ' field ' .. ARGV[$id] .. ' ' .. bad .. ', not ' .. hdr)
      elseif not carried then
        return redis.error_reply('RLCONVERT ' .. usedLetter(fv, fz, $zkey))
      end
    end
  end
end
--@set
-- Its state, as the conversion script reads it: its sorted set, zkey,
-- which opens with its header at score -inf. A set of its own header is
-- read as it is; one of its own kind under other parameters (old0, the
-- writer's) is carried by the body; any other set, a key of another type,
-- or a field of its ID in the key's hash (another kind's state) is
-- refused with an RLMISMATCH error, or, when the limit resets on mismatch
-- (afresh), started afresh (wipe: what an admission removes first, 1 the
-- set, 2 the field), charged with what another kind's state had used
-- (carried).
local zkey = $zkey
local hdr = ARGV[$hdr]
local afresh = $afresh
local head, state, old0, old1, wipe, carried, other = {}, false, nil, nil, nil, 0, false
do
  local bad, fv, fz = nil, nil, false
  head = redis.pcall('ZRANGE', zkey, 0, 1, 'WITHSCORES')
  if head.err then
    bad, wipe, head = 'is not a sorted set', 1, {}
  elseif head[1] then
    state = true
    -- A generation after the header member's header (set.lua) stays:
    -- hdr, which the body writes, ends with it.
    local h1 = head[1]
    local hb, hg = string.match(h1, '^(.-)(;%w+)$')
    if hb then
      h1, hdr = hb, hdr .. hg
      if h1 == ARGV[$hdr] then
        h1 = hdr
      end
    end
    if h1 ~= hdr or not (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
      local k, p0, p1 = string.match(h1, '^#(%u)(%d+),?(%d*)$')
      if k then -- not tonumber(nil): miniredis's Lua raises an error
        p0, p1 = tonumber(p0), tonumber(p1)
      end
      if k and k == string.sub(hdr, 2, 2) and p0 and p0 >= 1 and p0 <= 281474976710656 and
          (p1 == nil) == (string.find(hdr, ',', 1, true) == nil) and (p1 == nil or (p1 >= 1 and p1 <= 281474976710656)) and
          (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
        old0, old1 = p0, p1
      elseif k and k ~= string.sub(hdr, 2, 2) and (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
        -- Another kind's set (two kinds keep sorted sets: the sliding log
        -- and the in-flight limit): carried (what it had used) whatever
        -- the limit's mode, as another kind's field is.
        bad, wipe, state, head, hdr, fz = 'holds another algorithm\'s state (#' .. k .. ')', 1, false, {}, ARGV[$hdr], true
      else
        bad, wipe, state, head, hdr = 'does not hold a state of this version', 1, false, {}, ARGV[$hdr]
      end
    end
  else
    fv = redis.pcall('HGET', hkey, ARGV[$id]) -- a hash's key of another type holds no state of this ID
    if type(fv) == 'string' then
      bad, wipe = 'is missing, and ' .. hkey .. ' holds another algorithm\'s state under ID ' .. ARGV[$id], 2
    else
      fv = nil
    end
  end
  if bad then
    -- Another kind's state is carried (what it had used), whatever the
    -- limit's mode; anything else only when it starts afresh.
    if not afresh and not (fv or fz) then
      return redis.error_reply('RLMISMATCH ' .. zkey .. ' ' .. bad .. ', not ' .. hdr)
    end
    if fv or fz then
      other = true
      carried = usedOf(fv, fz, zkey, now, afresh)
      if carried == false then
        return redis.error_reply('RLMISMATCH ' .. zkey .. ' ' .. bad .. ', not ' .. hdr)
      elseif not carried then
        return redis.error_reply('RLCONVERT ' .. usedLetter(fv, fz, zkey))
      end
    end
  end
end
--@store
-- The state written, after its header; the key lives as long as its
-- longest-lived field needs. A key that held a field the script read has
-- a TTL, since every write of a field sets one: GT extends it when this one
-- is longer. Any other key gets it with NX when it has none, and else with
-- GT (which takes no TTL for an infinite one, so it cannot set one).
redis.call('HSET', hkey, ARGV[$id], shdr .. value)
ttl = ttl + tonumber(ARGV[3])
if held then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
elseif redis.call('PEXPIRE', hkey, ttl, 'NX') == 0 then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
end
