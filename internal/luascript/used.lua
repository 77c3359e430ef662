-- What a state of another kind had used at now (Go: algorithm.Used), for
-- a limit that starts it afresh: a field's value fv (its header, then its
-- body from at), or, when fv is nil (fz), the sorted set zkey, which opens
-- with its header. Each kind's branch is its package's --@used part, which
-- reads p0 and p1 (the header's parameters) and sets used, a whole number,
-- or leaves it nil when it cannot read the state (fully used: 2^40). A
-- kind this script was not composed for gives nil: the load replies
-- RLCONVERT with its letter (usedLetter), and the store composes the script
-- that reads it. A value without a header, or a set without one, is no
-- state of any kind: 0. Another kind's state is carried whatever the
-- limit's mode; one no algorithm of this store reads (no header, a kind
-- no package registered, a body its kind cannot read) gives false
-- (refused) unless the limit starts afresh.
local function usedLetter(fv, fz, zkey)
  if fv then
    return string.sub(fv, 1, 1)
  end
  local head = redis.pcall('ZRANGE', zkey, 0, 0)
  return type(head[1]) == 'string' and string.match(head[1], '^#(%u)') or ''
end
local function usedOf(fv, fz, zkey, now, afresh)
  local k, p0, p1, at, head, used
  if fv then
    local s, e
    s, e, k, p0, p1 = string.find(fv, '^(%u)(%d+),?(%d*);?%w*:')
    if not k then
      return afresh and 0
    end
    at = e + 1
  else
    head = redis.pcall('ZRANGE', zkey, 0, 1, 'WITHSCORES')
    if head.err or not head[1] or not (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
      return afresh and 0
    end
    k, p0, p1 = string.match(string.gsub(head[1], ';%w+$', ''), '^#(%u)(%d+),?(%d*)$')
    if not k then
      return afresh and 0
    end
  end
  p0 = tonumber(p0)
  if p1 == '' then
    p1 = nil
  else
    p1 = tonumber(p1)
  end
  local known = false
--@kinds
  if not known then
    return nil
  end
  if used == nil and not afresh then
    return false -- unreadable: refused unless the limit starts afresh
  end
  if used == nil or used > 1099511627776 then
    return 1099511627776
  elseif used < 0 then
    return 0
  end
  return used
end
