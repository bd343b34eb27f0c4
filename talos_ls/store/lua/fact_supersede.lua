-- Close a fact's validity interval if it is still open. ARGV: prefix, old key, new key, at.
local h = P .. 'f:' .. ARGV[2]
if redis.call('EXISTS', h) == 0 or redis.call('HEXISTS', h, 'invalid_at') == 1 then return 0 end
redis.call('HSET', h, 'invalid_at', ARGV[4], 'superseded_by', ARGV[3])
return 1
