-- Fixed window (Go: fixedwindow.Window).
-- Parameters: $1 limit, $2 window in µs.
-- State: the header "F<limit>,<window>:", then "<window index> <count>". A clock that stepped back into
-- an earlier window stays in the counted one, unless that window starts
-- more than 2^48 µs (algorithm.MaxDuration) after now's: no clock steps
-- back that far, and such an index is another window length's (a minute's
-- index read as an hour's lies centuries ahead), so the state counts as
-- fresh rather than make every wait that long. A value that is not such a
-- state, or a count above 2^40 (no limit is larger), is refused with an
-- RLMISMATCH error (or started afresh).
local limit = tonumber(ARGV[$1])
local window = tonumber(ARGV[$2])

-- The window of now, ⌊now/window⌋, exact for whole numbers below 2^53.
local index = math.floor(now / window)
if index * window > now then
  index = index - 1
elseif (index + 1) * window <= now then
  index = index + 1
end
local count = 0
if state then
  local stored, counted = string.match(state, '^(%-?%d+) (%d+)$', at)
  stored, counted = tonumber(stored), tonumber(counted)
  if stored and counted and stored >= -9007199254740992 and stored <= 9007199254740992 and counted <= 1099511627776 then
    if old0 and counted > 0 then
      -- Written under limit old0 and window old1 (design §2.4, §2.8):
      -- the count as the old window reads it at now (none once its window
      -- has ended, or when it lies more than 2^48 µs ahead) stays counted
      -- (as-is, capped at the limit) or carries as the fraction of the old
      -- limit (proportional, rounded up, capped). Under another window
      -- length it counts in the window of now.
      if old1 ~= window then
        local oi = math.floor(now / old1)
        if oi * old1 > now then
          oi = oi - 1
        elseif (oi + 1) * old1 <= now then
          oi = oi + 1
        end
        local oahead = math.floor(281474976710656 / old1)
        if oahead * old1 > 281474976710656 then
          oahead = oahead - 1
        elseif (oahead + 1) * old1 <= 281474976710656 then
          oahead = oahead + 1
        end
        if stored < oi or stored > oi + oahead then
          counted = 0
        end
        stored = index
      end
      if counted > 0 and (ARGV[$mode] == '1' or ARGV[$mode] == '3') then
        -- ⌈counted·limit/old0⌉ for whole numbers up to 2^40: long
        -- division, 4 bits of limit at a time.
        local q, r = 0, 0
        for shift = 40, 0, -4 do
          local x = r * 16 + counted * (math.floor(limit / 2 ^ shift) % 16)
          local d = math.floor(x / old0)
          if d * old0 > x then
            d = d - 1
          elseif (d + 1) * old0 <= x then
            d = d + 1
          end
          q, r = q * 16 + d, x - d * old0
        end
        if r > 0 then
          q = q + 1
        end
        counted = q
      end
      if counted > limit then
        counted = limit
      end
    end
    local ahead = 1 -- at least: ⌊2^48/window⌋ ≥ 1
    if stored > index + 1 then
      -- ⌊2^48/window⌋, the most windows a counted one may lie ahead,
      -- computed only past the next window.
      ahead = math.floor(281474976710656 / window)
      if ahead * window > 281474976710656 then
        ahead = ahead - 1
      elseif (ahead + 1) * window <= 281474976710656 then
        ahead = ahead + 1
      end
    end
    if counted > 0 and stored >= index and stored <= index + ahead then
      index, count = stored, counted
    end
  elseif not afresh then
    return redis.error_reply('RLMISMATCH ' .. hkey .. ' field ' .. ARGV[$id] .. ' holds ' .. #state .. ' bytes that are not a fixed window')
  end
end

local ends = (index + 1) * window - now
local fits = count + cost <= limit

--@report
local rem, retry, reset = limit - count, ends, 0
if rem < 0 then
  rem = 0 -- counted under a larger limit
end
if fits then
  retry = 0
end
if count > 0 then
  reset = ends
end

--@commit
count = count + cost
local ttl = math.ceil(ends / 1000)
if ttl < 2 then
  ttl = 2
end
local value = string.format('%.0f %.0f', index, count)
local rem, reset = limit - count, ends
