--@load
-- Its state: the field of its state ID in the key's hash, after its own
-- header; none is fresh. Another header, or an error reply (state.err: no
-- hash), is for the conversion script: RLCONVERT and the kind's letter.
-- shdr: its header as stored, maybe a generation (";<nonce>", ops.go) before ':'.
local state = redis.pcall('HGET', hkey, ARGV[$id])
local shdr = ARGV[$hdr]
if state then
  local e = not state.err and (string.find(state, shdr, 1, true) == 1 and #shdr or #state > #shdr and string.byte(state, #shdr) == 59 and
    string.sub(state, 1, #shdr - 1) == string.sub(shdr, 1, -2) and string.find(state, ':', #shdr, true))
  if not e then
    return redis.error_reply('RLCONVERT ' .. (not state.err and string.match(state, '^(%u)%d') or ''))
  end
  if e > #shdr then shdr = string.sub(state, 1, e) end
  held = true
end
local at = #shdr + 1
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
-- The state written, after its header (shdr); the key lives as long as its
-- longest-lived field needs: a bare key gets the TTL outright, a held one
-- only a longer one (GT), any other one at least one (NX).
redis.call('HSET', hkey, ARGV[$id], shdr .. value)
ttl = ttl + tonumber(ARGV[3])
if bare then
  redis.call('PEXPIRE', hkey, ttl)
elseif held or redis.call('PEXPIRE', hkey, ttl, 'NX') == 0 then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
end
--@lasting
-- The state written, after its header (shdr); the TTL too, unless it lasts.
redis.call('HSET', hkey, ARGV[$id], shdr .. value)
ttl = ttl + tonumber(ARGV[3])
if bare then
  redis.call('PEXPIRE', hkey, ttl)
elseif not lasts and (held or redis.call('PEXPIRE', hkey, ttl, 'NX') == 0) then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
end
--@counted
-- A state that counts units of the window of now within its limit
-- (counter, the window's index) keeps its count in a field of its own,
-- which the field of the ID points at ("<index> *"), when the key has
-- room (docs/design/counter-window.md): the counter part charges it with
-- HINCRBY.
if counter and redis.call('HLEN', hkey) + 2 <= $most then
  redis.call('HSET', hkey, ARGV[$id], shdr .. counter .. ' *', $cpre .. counter, count)
else
  redis.call('HSET', hkey, ARGV[$id], shdr .. value)
end
