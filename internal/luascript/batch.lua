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
-- before it, and the ones after it were not decided (their state is
-- written as the requests before left it).
--
-- The script is the decision script's parts (luascript.go, composeParts)
-- in this frame: the head reads the limits' fields of the key's hash once
-- into a Lua table (fcur, by the field's place); decide is the decision
-- script of one request, whose loads read fcur. A request that writes a
-- field keeps the state's numbers (fcv1…, marked in fown) for the next
-- request, which takes them in place of parsing the state (each body
-- marks its parse and its encode: luascript.go, carry); the tail encodes
-- every field written once, writes them with one HSET, and the key's TTL
-- once, the longest any request asked for. So n decisions cost one read
-- and one write of the hash, not n of each, and one parse and one encode
-- of each state. Tables rather than a local per field: decide reads them
-- as upvalues, of which Lua allows a function 60, and a Policy may have
-- more limits than that. Within decide, ARGV is the table below: the
-- decision script's arguments, with the request's now and cost in
-- ARGV[1] and ARGV[2].
local A = ARGV
local n = tonumber(A[1])
local ARGV = {}
for j = 3, #A - 2 * n + 1 do
  ARGV[j] = A[j + 2 * n - 1]
end
--@head
-- replies: each request's reply in turn, which decide(roff) writes from
-- replies[roff + 1] on; decide returns nothing, or an error reply.
local replies = {}
local function decide(roff)
--@decision
end
for i = 1, n do
  ARGV[1], ARGV[2] = A[2 * i], A[2 * i + 1]
  local err = decide(#replies)
  if err then
    if i == 1 then
      return err
    end
    break
  end
end
--@tail
return replies
