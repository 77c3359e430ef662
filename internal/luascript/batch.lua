-- Batch: the decisions of several requests for one key, made in order by
-- one script, each exactly as the decision script alone would make it
-- after the ones before (docs/design/coalescing.md §3).
--
-- ARGV[1]            n, how many requests
-- ARGV[2i], ARGV[2i+1]  request i's now and cost (the decision script's
--                    ARGV[1] and ARGV[2])
-- ARGV[2n+2…]        the decision script's ARGV[3…], the same for all
--
-- The reply is each request's reply in turn ({remaining, retry, reset}
-- per limit). A request whose decision replies an error (RLMISMATCH,
-- before it writes anything) ends the batch: the error is the reply when
-- it is the first request's; otherwise the reply holds the requests
-- before it, and the ones after it were not decided.
--
-- The decision script runs unchanged, once per request, against a view of
-- the key's hash kept in the script (redis below): the first read of a
-- field asks Redis, a write is kept in the view, later reads see it, and
-- every field written is written once at the end, with the longest TTL
-- any request asked for. So n decisions cost one HGET and one HSET, not
-- n of each. A command the view does not keep (a sorted set's, TYPE,
-- DEL…) first writes what the view holds for its key, so Redis sees every
-- command in the order the decisions made them.
local real = redis
local views = {}

local function flush(k)
  local v = views[k]
  if not v then
    return
  end
  views[k] = nil
  local hs = {}
  for field in pairs(v.dirty) do
    hs[#hs + 1] = field
    hs[#hs + 1] = v.f[field]
  end
  if #hs > 0 then
    real.call('HSET', k, unpack(hs))
  end
  -- The requests' PEXPIRE GT (NX on a key with no TTL), in turn, leave
  -- the longest of their TTLs, or the key's own when it is longer.
  if v.ttl and real.call('PEXPIRE', k, v.ttl, 'GT') == 0 then
    real.call('PEXPIRE', k, v.ttl, 'NX')
  end
end

local function view(k)
  local v = views[k]
  if not v then
    v = {f = {}, dirty = {}}
    views[k] = v
  end
  return v
end

-- exec runs cmd on key k through the view; raw is redis.call or
-- redis.pcall, as the script called it.
local function exec(raw, cmd, k, ...)
  if cmd == 'HGET' then
    local v, field = view(k), ...
    local x = v.f[field]
    if x == nil then
      x = raw('HGET', k, field)
      if type(x) == 'table' then
        return x -- an error reply (WRONGTYPE): not kept
      end
      v.f[field] = x
    end
    return x
  elseif cmd == 'HMGET' then
    local v, n = view(k), select('#', ...)
    for i = 1, n do
      if v.f[(select(i, ...))] == nil then
        local got = raw('HMGET', k, ...)
        if got.err then
          return got
        end
        for j = 1, n do
          local field = (select(j, ...))
          if v.f[field] == nil then
            v.f[field] = got[j]
          end
        end
        break
      end
    end
    local out = {}
    for i = 1, n do
      out[i] = v.f[(select(i, ...))]
    end
    return out
  elseif cmd == 'HSET' then
    local v = view(k)
    for i = 1, select('#', ...), 2 do
      local field, value = select(i, ...)
      v.f[field] = value
      v.dirty[field] = true
    end
    return 0
  elseif cmd == 'PEXPIRE' and views[k] and next(views[k].dirty) then
    local v, ttl = views[k], tonumber((...))
    if v.ttl == nil or ttl > v.ttl then
      v.ttl = ttl
    end
    return 1 -- as if extended: the request's NX is not needed
  end
  if k == nil then
    return raw(cmd)
  end
  flush(k)
  return raw(cmd, k, ...)
end

local redis = setmetatable({
  call = function(...) return exec(real.call, ...) end,
  pcall = function(...) return exec(real.pcall, ...) end,
}, {__index = real})

local function decide(ARGV)
--@decision
end

local n = tonumber(ARGV[1])
local args = {}
for j = 3, #ARGV - 2 * n + 1 do
  args[j] = ARGV[j + 2 * n - 1]
end
local out = {}
for i = 1, n do
  args[1], args[2] = ARGV[2 * i], ARGV[2 * i + 1]
  local r = decide(args)
  if r.err then
    if i == 1 then
      return r
    end
    break
  end
  for j = 1, #r do
    out[#out + 1] = r[j]
  end
end
for k in pairs(views) do
  flush(k)
end
return out
