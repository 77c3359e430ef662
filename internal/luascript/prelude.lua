-- The request: now (the caller's, or the server's clock) and its cost; a
-- peek decides for a cost of 1 and writes nothing.
local now = tonumber(ARGV[1])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local peek = cost == 0
if peek then
  cost = 1
end
