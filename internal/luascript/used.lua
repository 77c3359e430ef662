-- What a state of another kind had used (Go: algorithm.Used), for a limit
-- that starts such a state afresh: usedOf(fv, fz, zkey, now), which the
-- composer puts once in the head of a script (luascript.go), made only
-- when one of its limits resets on mismatch ($afresh: their modes are "2"
-- or "3"), so that no other call pays for the closure; a load that found
-- another kind's state calls it (load.lua, slidinglog.lua). It reads fv,
-- the value of a field of the key's hash (its header, then its body), or,
-- when fv is nil (fz), the sorted set zkey of a sliding log, and returns
-- the units that state had used at now, a whole number in [0, 2^40]:
--   T, I  ⌈capacity − tokens⌉ as stored (no refill: the rate is not in
--         the header); a debt counts beyond the capacity
--   G     ⌈max(TAT − now, 0) / emission interval⌉
--   F     the fill pointer of the window of now, as the window reads it
--   S     the estimate at now, count plus the previous window's share
--         rounded up, as the counter computes it
--   L     the cost of the members after t − window, t being now or the
--         log's clock when later (bookings ahead included)
-- A header of a kind it does not know, or one whose parameters or body
-- it cannot read, counts as 2^40: fully used; a value with no header (or
-- a sorted set without a log's) is no state of any kind and counts 0.
local usedOf = nil
if $afresh then
usedOf = function(fv, fz, zkey, now)
  local u = 1099511627776
  local function fdiv(a, b)
    local q = math.floor(a / b)
    if q * b > a then
      q = q - 1
    elseif (q + 1) * b <= a then
      q = q + 1
    end
    return q
  end
  if fv then
    local _, e, k, p0, p1 = string.find(fv, '^(%u)(%d+),?(%d*):')
    if k then -- not tonumber(nil): miniredis's Lua raises an error
      p0 = tonumber(p0)
      if p1 == '' then
        p1 = nil
      else
        p1 = tonumber(p1)
      end
    end
    local two = k == 'G' or k == 'F' or k == 'S'
    if k and p0 and p0 >= 1 and p0 <= 1099511627776 and (p1 ~= nil) == two and
        (p1 == nil or (p1 >= 1 and p1 <= 281474976710656)) then
      if k == 'T' then
        if #fv == e + 16 then
          local x
          local st = rawget(_G, 'struct')
          if st then
            x = st.unpack('<d', fv, e + 1)
          else
            local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fv, e + 1, e + 8)
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
            u = math.ceil(p0 - x)
          end
        end
      elseif k == 'I' then
        local x, l = string.match(fv, '^(%-?%d+) (%-?%d+)$', e + 1)
        if x then
          x = tonumber(x)
        end
        if x and x >= -9007199254740992 and x <= 9007199254740992 then
          u = p0 - x
        end
      elseif k == 'G' then
        local tat = string.match(fv, '^(%-?%d+)$', e + 1)
        if tat then
          tat = tonumber(tat)
        end
        if tat and tat >= -9007199254740992 and tat <= 9007199254740992 then
          u = 0
          if tat > now then
            local d = tat - now
            u = fdiv(d, p1)
            if u * p1 < d then
              u = u + 1
            end
          end
        end
      elseif k == 'F' then
        local i, c = string.match(fv, '^(%-?%d+) (%d+)$', e + 1)
        if i then
          i, c = tonumber(i), tonumber(c)
        end
        if i and c and i >= -9007199254740992 and i <= 9007199254740992 and c <= 2 * p0 then
          local index = fdiv(now, p1)
          u = 0
          if c == 0 or i > index + fdiv(281474976710656, p1) then
            u = 0
          elseif i >= index then
            u = c
          elseif i == index - 1 and c > p0 then
            u = c - p0
          end
        end
      elseif k == 'S' then
        local i, c, p = string.match(fv, '^(%-?%d+) (%d+) (%d+)$', e + 1)
        if i then
          i, c, p = tonumber(i), tonumber(c), tonumber(p)
        end
        if i and c and p and i >= -9007199254740992 and i <= 9007199254740992 and c <= 2199023255552 and p <= 1099511627776 then
          if c > 2 * p0 then
            c = 2 * p0
          end
          local index = fdiv(now, p1)
          local count, prev = 0, 0
          if (c == 0 and p == 0) or i > index + fdiv(281474976710656, p1) then
            count = 0
          elseif i >= index then
            index, count, prev = i, c, p
          elseif i == index - 1 then
            count, prev = math.max(c - p0, 0), math.min(c, p0)
          elseif i == index - 2 and c > p0 then
            prev = math.min(c - p0, p0)
          end
          u = count
          if prev > 0 then
            local el = now - index * p1
            if el < 0 then
              el = 0
            end
            -- ⌈prev·(p1 − el)/p1⌉ for prev ≤ 2^40 and p1 ≤ 2^48: exact
            -- below 2^53, else long division, 4 bits at a time.
            local a, b = prev, p1 - el
            local q, r
            if a * b < 9007199254740992 then
              q = fdiv(a * b, p1)
              r = a * b - q * p1
            else
              q, r = 0, 0
              for shift = 48, 0, -4 do
                local x = r * 16 + a * (math.floor(b / 2 ^ shift) % 16)
                local d = fdiv(x, p1)
                q, r = q * 16 + d, x - d * p1
              end
            end
            if r > 0 then
              q = q + 1
            end
            u = count + q
          end
        end
      end
    end
  else
    -- A set that is not a sliding log of this version (no header) is no
    -- state of any kind: nothing carries, as before.
    u = 0
    local z = zkey
    local head = redis.pcall('ZRANGE', z, 0, 1, 'WITHSCORES')
    local w = nil
    if not head.err and head[1] and (head[2] == '-inf' or tonumber(head[2]) == -math.huge) then
      w = string.match(head[1], '^#L(%d+)$')
      if w then
        w = tonumber(w)
      end
    end
    if w and w >= 1 and w <= 281474976710656 then
      local clock = nil
      if head[3] and (head[4] == '-inf' or tonumber(head[4]) == -math.huge) then
        local c = string.match(head[3], '^#M(%-?%d+)$')
        if c then
          clock = tonumber(c)
        end
      end
      local newest = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
      u = 0
      if newest[1] and string.byte(newest[1], 1) ~= 35 then -- 35 is '#': the header or the clock alone
        local total, last = nil, tonumber(newest[2])
        if string.match(newest[1], '^%d+$') then
          total = tonumber(newest[1])
        end
        u = 1099511627776
        if total and total < 4503599627370496 and last and last >= -9007199254740992 and last <= 9007199254740992 and last == math.floor(last) then
          local t = now
          if not clock then
            clock = last
          end
          if clock > t then
            t = clock
          end
          local cut = t - w
          u = 0
          if last > cut then
            local base = 0
            local dead = redis.call('ZREVRANGEBYSCORE', z, string.format('%.0f', cut), '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
            if dead[1] and string.byte(dead[1], 1) ~= 35 then
              base = nil
              if string.match(dead[1], '^%d+$') then
                base = tonumber(dead[1])
              end
            end
            if base and base < 4503599627370496 then
              u = total - base
              if u < 0 then
                u = u + 4503599627370496
              end
            else
              u = 1099511627776
            end
          end
        end
      end
    end
  end
  if u < 0 then
    u = 0
  elseif u > 1099511627776 then
    u = 1099511627776
  end
  return u
end
end
