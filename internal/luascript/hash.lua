--@load
-- Its state: the field of its state ID in the key's hash, after its own
-- header; none is fresh. Another header, or an error reply (state.err: no
-- hash), is for the conversion script: RLCONVERT and the kind's letter.
local state = redis.pcall('HGET', hkey, ARGV[$id])
if state then
  if state.err or string.find(state, ARGV[$hdr], 1, true) ~= 1 then
    return redis.error_reply('RLCONVERT ' .. (not state.err and string.match(state, '^(%u)%d') or ''))
  end
  held = true
end
local at = #ARGV[$hdr] + 1
--@fresh
-- A field the key lacks: a bare key (holding nothing) gets its TTL
-- outright; else a sorted set of the ID (another kind's state) is for the
-- conversion script, and a Take must leave the key at most $most fields.
if not state then
  if redis.call('EXISTS', hkey, $zkey) == 0 then
    bare = true
  elseif redis.call('EXISTS', $zkey) == 1 then
    local z = redis.pcall('ZRANGE', $zkey, 0, 0)
    return redis.error_reply('RLCONVERT ' .. (type(z[1]) == 'string' and string.match(z[1], '^#(%u)') or ''))
  elseif $take then
    local hn = redis.call('HLEN', hkey)
    if hn + 1 > $most then
      return redis.error_reply('RLTOOMANY ' .. hkey .. ' holds ' .. hn .. ' fields; a key keeps at most $most')
    end
  end
end
--@store
-- The state written, after its header; the key lives as long as its
-- longest-lived field needs: a bare key gets the TTL outright, a held one
-- only a longer one (GT), any other one at least one (NX).
redis.call('HSET', hkey, ARGV[$id], ARGV[$hdr] .. value)
ttl = ttl + tonumber(ARGV[3])
if bare then
  redis.call('PEXPIRE', hkey, ttl)
elseif held or redis.call('PEXPIRE', hkey, ttl, 'NX') == 0 then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
end
