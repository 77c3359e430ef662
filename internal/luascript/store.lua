-- The write of a state kept in the key's hash, after the body's commit
-- part has set value (the body, after the header) and ttl (ms, at least
-- 2): the field, then the key's TTL, which is the longest its fields
-- need: PEXPIRE GT extends a shorter one, and NX sets it on a key that
-- has none (GT treats no TTL as an infinite one, and answers 0).
redis.call('HSET', hkey, ARGV[$id], ARGV[$hdr] .. value)
ttl = ttl + margin
if redis.call('PEXPIRE', hkey, ttl, 'GT') == 0 then
  redis.call('PEXPIRE', hkey, ttl, 'NX')
end
