-- Close a live annotation. ARGV: prefix, id, at. Returns 1 if this call closed it.
local h = P .. 'j:' .. ARGV[2]
if redis.call('ZSCORE', P .. 'journal', ARGV[2]) == false then return 0 end
redis.call('HSET', h, 'invalid_at', ARGV[3])
redis.call('ZREM', P .. 'journal', ARGV[2])
return 1
