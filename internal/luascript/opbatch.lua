-- Op batch: several requests of one booking operation (Op: book, refund
-- or cancel) for one key, run in order by one script, each exactly as the
-- op's script alone would run it after the ones before
-- (docs/design/coalescing.md §8).
--
-- ARGV[1]            n, how many requests
-- ARGV[2]            m, how many arguments each request has of its own:
--                    its now and cost (the op script's ARGV[1] and
--                    ARGV[2]), then the op's arguments (the op script's,
--                    after the limits': a book's maxDelay, a cancel's
--                    instant and values)
-- ARGV[3…2+n·m]      the requests' own, request i's from 3 + (i-1)·m
-- ARGV[3+n·m…]       the op script's ARGV[3…] up to the op's arguments,
--                    the same for all
--
-- The reply is each request's reply in turn, as the op script replies
-- it (a book's strings, a refund's or a cancel's integers). A request
-- whose script replies an error (RLMISMATCH, before it writes anything)
-- ends the batch: the error is the reply when it is the first request's;
-- otherwise the reply holds the requests before it, and the ones after it
-- were not run.
--
-- Unlike a batch of Takes (batch.lua), the op script runs whole per
-- request, reading and writing Redis itself: bookings are rarer than
-- Takes, and a cancel compares the state Redis holds with the one its
-- booking left, so each request sees Redis as the ones before left it.
-- What a batch saves is the script calls and round trips.
local A = ARGV
local n, m = tonumber(A[1]), tonumber(A[2])
local shared = #A - 2 - n * m
local ARGV = {}
for j = 1, shared do
  ARGV[2 + j] = A[2 + n * m + j]
end
local function run()
--@op
end
local replies = {}
for i = 1, n do
  local at = 2 + (i - 1) * m
  ARGV[1], ARGV[2] = A[at + 1], A[at + 2]
  for j = 3, m do
    ARGV[shared + j] = A[at + j]
  end
  local r = run()
  if r.err then
    if i == 1 then
      return r
    end
    break
  end
  for j = 1, #r do
    replies[#replies + 1] = r[j]
  end
end
return replies
