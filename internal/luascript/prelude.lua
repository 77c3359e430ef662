-- Prelude of every limiter script. The store sends it followed by one
-- algorithm's body; together they make one script, run atomically.
--
-- KEYS[1]  the key's state
-- ARGV[1]  now, in Unix microseconds; empty to read the server's TIME
-- ARGV[2]  the cost to take (1..limit), or 0 to peek: report the state for
--          a cost of 1 and write nothing (safe under EVALSHA_RO)
-- ARGV[3]  extra milliseconds every TTL gets (the store's TTL margin)
-- ARGV[4…] the algorithm's parameters, named in its body
--
-- Every script returns {remaining, retry after µs, reset after µs}: whole
-- numbers below 2^53, exact as integer replies. The cost was (or, for a
-- peek, would be) admitted exactly when retry after is 0, so that is not
-- sent: every element of the reply costs the server time.
--
-- Scripts define as few functions as they can: each runs as a fresh call,
-- so every function is a closure allocated again on every decision.
-- TTLs are written as ttl(µs) would: rounded up to milliseconds, at least 2
-- (Redis reads its clock for the deadline, then again to see whether it
-- has passed, and deletes the key at once when a millisecond ends in
-- between a 1 ms TTL), plus the margin.
-- The arithmetic mirrors the Go transition of the same algorithm operation
-- for operation, so that both give bit-identical results. Nothing is
-- written before every value is computed; the state and its TTL are written
-- by one command at the end.
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local peek = cost == 0
if peek then
  cost = 1
end

