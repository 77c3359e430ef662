-- Prelude of every limiter script. A script decides for one limit or for
-- several limits on one key: the prelude, then each limit's algorithm body
-- (luascript.go puts them together), run atomically.
--
-- KEYS       the keys the script needs on the node it runs on: the
--            key's hash, prefix{k}# (one field per state ID, whose value
--            is the state's header, algorithm.Tag.Header "T100:", then
--            its body, for every algorithm but the sliding log) when a
--            limit keeps its state there; then each sliding log's sorted
--            set, prefix{k}#ID ("#{}" for the empty ID). The other names
--            are derived (a string-state limit looks for a log's sorted
--            set on a miss), so that a Limiter's script declares one key.
--            Callers may also pass the hash, then one sorted set per limit.
-- ARGV[1]    now, in Unix microseconds; empty to read the server's TIME
-- ARGV[2]    the cost to take (1..limit), or 0 to peek: report the state
--            for a cost of 1 and write nothing (safe under EVALSHA_RO)
-- ARGV[3]    extra milliseconds every TTL gets (the store's TTL margin)
-- ARGV[4…]   each limit's arguments in turn: its state ID ($id), its
--            header ($hdr), its mode ($mode: "0" as-is, "1" proportional,
--            "2" and "3" the same starting afresh on a state it cannot
--            read), then its algorithm's parameters ($1, $2…)
--
-- A script returns {remaining, retry after µs, reset after µs} for each
-- limit in turn: whole numbers below 2^53, exact as integer replies. A
-- limit admits the cost exactly when its retry after is 0. The cost is
-- charged, to every limit, only when every limit admits it; otherwise
-- nothing is written and each limit reports its state as it stands.
--
-- A state of the reader's header is read as it is; one of the same
-- algorithm under another header (other parameters) is converted by the
-- mode's rule (docs/design/state-format.md §2); anything else is refused
-- with an RLMISMATCH error reply before any write, or, in modes 2 and 3,
-- started afresh (an admission replaces it), charged with what a state of
-- another algorithm had used (used.lua; Go: algorithm.Carry). No raw Lua error can reach
-- the caller.
--
-- An algorithm's body has three parts: the first sets fits, after
-- "--@report" the part that sets rem, retry and reset for the state as it
-- stands, after "--@commit" the part that charges the cost
-- (docs/design/lua-composition.md describes every mark and stage).
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

