--@load
-- Its state: its sorted set, zkey, which opens with its own header at
-- score -inf; none is a fresh state. A set of another header, a key of
-- another type, or no set while the key's hash holds a field of its ID
-- (another kind's state), is for the store's conversion script: RLCONVERT
-- and the kind's letter, before anything is written.
local zkey = $zkey
local hdr = ARGV[$hdr]
local head = redis.pcall('ZRANGE', zkey, '0', '1', 'WITHSCORES')
if head.err then
  return redis.error_reply('RLCONVERT ') -- a key of another type
end
local state = head[1] ~= nil
if state then
  -- A header member with a generation after it (";<nonce>", which a
  -- booking gives a state that has none; ops.go): hdr, which the body
  -- writes, is all of it.
  if head[1] ~= hdr and string.sub(head[1], 1, #hdr + 1) == hdr .. ';' and not string.find(head[1], '%W', #hdr + 2) then
    hdr = head[1]
  end
  if head[1] ~= hdr or not (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
    return redis.error_reply('RLCONVERT ' .. (string.match(head[1], '^#(%u)') or ''))
  end
else
  local fv = redis.pcall('HGET', hkey, ARGV[$id])
  if type(fv) == 'string' then
    return redis.error_reply('RLCONVERT ' .. (string.match(fv, '^(%u)%d') or ''))
  end
end
