-- Continuous token bucket (Go: tokenbucket.Bucket).
-- Parameters: ARGV[$1] capacity, ARGV[$2] rate in tokens per second.
-- State: the header "T<capacity>:", then 16 bytes, tokens and the last
-- update in µs as two little-endian IEEE 754 doubles: exact, and shorter
-- than text with 17 digits. Anything else is refused with an RLMISMATCH
-- error (or started afresh).
--#setup capacity, per_micro, struct, enc, dec
local capacity = tonumber(ARGV[$1])
local per_micro = tonumber(ARGV[$2]) / 1e6

-- Redis has the struct library; miniredis's Lua does not, so there two
-- plain-Lua functions stand in for it, writing the same bytes.
local struct = rawget(_G, 'struct')
local enc, dec = nil, nil
if not struct then
  enc = function(x)
    local sign = 0
    if x < 0 or (x == 0 and 1 / x < 0) then
      sign, x = 128, -x
    end
    local m, e = math.frexp(x)
    local exp, mant = 0, 0
    if x ~= 0 then
      if e > -1022 then
        exp, mant = e + 1022, math.ldexp(m * 2 - 1, 52)
      else
        mant = math.ldexp(x, 1074)
      end
    end
    local b = {}
    for i = 1, 6 do
      b[i] = mant % 256
      mant = math.floor(mant / 256)
    end
    b[7] = (exp % 16) * 16 + mant
    b[8] = sign + math.floor(exp / 16)
    return string.char(b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
  end
  dec = function(s, i)
    local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(s, i, i + 7)
    local exp = (b8 % 128) * 16 + math.floor(b7 / 16)
    local mant = (((((b7 % 16) * 256 + b6) * 256 + b5) * 256 + b4) * 256 + b3) * 65536 + b2 * 256 + b1
    local x
    if exp == 0 then
      x = math.ldexp(mant, -1074)
    else
      x = math.ldexp(mant + 4503599627370496, exp - 1075)
    end
    if b8 >= 128 then
      x = -x
    end
    return x
  end
end
--#setupend
local tokens, last = capacity, now
--#convert
-- Started from a state of another kind (Go: algorithm.Carry): a fresh
-- state charged what that one had used, at most the limit, at now.
if carried > 0 then
  tokens = capacity - math.min(carried, capacity)
end
--#converted
if state then
  local k, l = 1e300, 0 -- out of range: not 16 bytes
--#parse k, l
  if #state == at + 15 then
    if struct then
      k, l = struct.unpack('<dd', state, at)
    else
      k, l = dec(state, at), dec(state, at + 8)
    end
  end
--#parsed
  -- Tokens within ±2^53 (below zero, a debt: booked ahead), a whole
  -- instant within ±2^53: NaN fails every comparison, and text that
  -- happens to be 16 bytes long decodes to a fraction of an instant.
  if k >= -9007199254740992 and k <= 9007199254740992 and l >= -9007199254740992 and l <= 9007199254740992 and l == math.floor(l) then
    tokens, last = k, l
--#convert
    if old0 then
      -- Written under capacity old0 (design §2.1): the tokens refilled
      -- at this bucket's rate up to now, capped at the old capacity, then
      -- what was used stays used (as-is) or the fraction held carries
      -- (proportional). A debt (units booked ahead) is kept under both.
      local e = now - last
      if e < 0 then
        e = 0
      end
      local a = tokens + e * per_micro
      if a > old0 then
        a = old0
      end
      if not proportional then
        local least = 0
        if a < 0 then
          least = a
        end
        tokens = a + (capacity - old0)
        if tokens < least then
          tokens = least
        end
      elseif a >= 0 then
        tokens = a * capacity / old0
        if tokens > capacity then
          tokens = capacity
        end
      else
        tokens = a
      end
      local most = 281474976710656 * per_micro -- no debt beyond 2^48 µs of refill
      if tokens < -most then
        tokens = -most
      end
      if now > last then
        last = now
      end
    end
--#converted
  else
--#unreadable ' holds ' .. #state .. ' bytes that are not a token bucket'
  end
end

-- The tokens held now: the stored ones plus what refilled since last,
-- capped; time going backwards adds nothing.
local elapsed = now - last
if elapsed < 0 then
  elapsed = 0
end
local avail = tokens + elapsed * per_micro
if avail > capacity then
  avail = capacity
end


local fits = cost <= avail

--@report
local rem = 0 -- none while in debt
if avail > 0 then
  rem = math.floor(avail)
end
-- The waits, exact as the refill computes them: the µs until the bucket
-- holds the cost, and until it is full (written out, not a function: a
-- function would be a closure made again on every call).
local retry = 0
if avail < cost then
  local e = math.ceil((cost - tokens) / per_micro)
  while tokens + e * per_micro < cost do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= cost do
    e = e - 1
  end
  retry = last + e - now
end
local reset = 0
if avail < capacity then
  local e = math.ceil((capacity - tokens) / per_micro)
  while tokens + e * per_micro < capacity do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= capacity do
    e = e - 1
  end
  reset = last + e - now
end

--@commit
tokens = avail - cost
if now > last then
  last = now
end
local reset = 0
if tokens < capacity then
  local e = math.ceil((capacity - tokens) / per_micro)
  while tokens + e * per_micro < capacity do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= capacity do
    e = e - 1
  end
  reset = last + e - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local rem = math.floor(tokens)
--#encode tokens, last
local value
if struct then
  value = struct.pack('<dd', tokens, last)
else
  value = enc(tokens) .. enc(last)
end

--@book
-- Booked at now for act (Go: Bucket.Book): dated max(last, now), holding
-- what a Take at act would leave less the refill until act; below zero,
-- a debt, cut at -2^53.
local e = act - last
if e < 0 then
  e = 0
end
local held = tokens + e * per_micro
if held > capacity then
  held = capacity
end
if now > last then
  last = now
end
local owed = act - last
if owed < 0 then
  owed = 0
end
tokens = held - cost - owed * per_micro
if tokens < -9007199254740992 then
  tokens = -9007199254740992
end
local reset = 0
if tokens < capacity then
  local e = math.ceil((capacity - tokens) / per_micro)
  while tokens + e * per_micro < capacity do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= capacity do
    e = e - 1
  end
  reset = last + e - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end
local value
if struct then
  value = struct.pack('<dd', tokens, last)
else
  value = enc(tokens) .. enc(last)
end
local rem = 0
if tokens > 0 then
  rem = math.floor(tokens)
end

--@refund
-- Up to n tokens back (Go: Bucket.Refund), to the capacity; a full
-- bucket has nothing to give back. A sum rounded up to n+1 whole tokens
-- more is taken a float lower (Go: math.Nextafter toward -Inf; the sum is
-- then at least 1). By key nothing while in debt: bookings not yet due.
-- gave: how many it gave back, n or the room when less, a fraction of a
-- token counting whole.
if keyed and avail < 0 then
  n = 0
end
local value
local gave = 0
if avail < capacity and n > 0 then
  gave = n
  if capacity - avail < n then
    gave = math.ceil(capacity - avail)
  end
  local was = 0
  if avail > 0 then
    was = math.floor(avail)
  end
  avail = avail + n
  if avail > capacity then
    avail = capacity
  end
  if math.floor(avail) - was > n then
    local m, e = math.frexp(avail)
    if m == 0.5 then
      avail = avail - math.ldexp(1, e - 54)
    else
      avail = avail - math.ldexp(1, e - 53)
    end
  end
  tokens = avail
  if now > last then
    last = now
  end
  if struct then
    value = struct.pack('<dd', tokens, last)
  else
    value = enc(tokens) .. enc(last)
  end
end
local rem = 0
if avail > 0 then
  rem = math.floor(avail)
end
local retry = 0
if avail < 1 then
  local e = math.ceil((1 - tokens) / per_micro)
  while tokens + e * per_micro < 1 do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= 1 do
    e = e - 1
  end
  retry = last + e - now
end
local reset = 0
if avail < capacity then
  local e = math.ceil((capacity - tokens) / per_micro)
  while tokens + e * per_micro < capacity do
    e = e + 1
  end
  while e > 0 and tokens + (e - 1) * per_micro >= capacity do
    e = e - 1
  end
  reset = last + e - now
end
local ttl = math.ceil(reset / 1000)
if ttl < 2 then
  ttl = 2
end

--@unused
-- What a booking of bcost due at act gives back (Go: Bucket.Unused): all
-- of it unless the bucket is still in debt at act, else bcost plus that
-- debt, rounded to the nearest (a tie down).
local give = 0
if act > now then
  local e = act - last
  if e < 0 then
    e = 0
  end
  local due = tokens + e * per_micro
  if due > capacity then
    due = capacity
  end
  if due >= 0 then
    give = bcost
  else
    give = math.ceil(bcost + due - 0.5)
    if give < 0 then
      give = 0
    end
  end
end

--@undo
-- What an admission of bcost due at act ≤ now gives back (Go:
-- Bucket.Undo): bcost less the refill since act, rounded down; nothing
-- while in debt (bookings not yet due).
local give = 0
local left = bcost - (now - act) * per_micro
if avail < 0 then
  left = 0
end
if left >= 1 then
  give = math.min(math.floor(left), bcost)
end

--@used
-- What a bucket's state had used (Go: used): ⌈capacity − tokens⌉ as
-- stored, the rate not being in the header (a debt counts beyond the
-- capacity).
if p0 <= 1099511627776 and #fv == at + 15 then
  local x
  local st = rawget(_G, 'struct')
  if st then
    x = st.unpack('<d', fv, at)
  else
    local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fv, at, at + 7)
    local ex = (b8 % 128) * 16 + math.floor(b7 / 16)
    local m = (((((b7 % 16) * 256 + b6) * 256 + b5) * 256 + b4) * 256 + b3) * 65536 + b2 * 256 + b1
    if ex == 2047 then
      x = 0 / 0 -- NaN or an infinity: out of range
    elseif ex == 0 then
      x = math.ldexp(m, -1074)
    else
      x = math.ldexp(m + 4503599627370496, ex - 1075)
    end
    if b8 >= 128 then
      x = -x
    end
  end
  if x >= -9007199254740992 and x <= 9007199254740992 then
    used = math.ceil(p0 - x)
  end
end
