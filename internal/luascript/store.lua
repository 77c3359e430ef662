-- The write of a state kept in the key's hash, after the body's commit
-- part has set value (the body, after the header) and ttl (ms, at least
-- 2): the field, then the key's TTL, which is the longest its fields
-- need, with one PEXPIRE. A key that held a field the script read (held,
-- load.lua) has a TTL, since every write of a field sets one: GT extends
-- it when this one is longer. Any other key (a new one, or one holding
-- only other IDs' fields) gets it with NX when it has none, and else with
-- GT (which treats no TTL as an infinite one, so it cannot set one). A
-- key made persistent by hand (PERSIST) stays so while it holds a field
-- the script reads.
redis.call('HSET', hkey, ARGV[$id], ARGV[$hdr] .. value)
ttl = ttl + margin
if held then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
elseif redis.call('PEXPIRE', hkey, ttl, 'NX') == 0 then
  redis.call('PEXPIRE', hkey, ttl, 'GT')
end
