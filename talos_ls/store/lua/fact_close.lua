-- Close a fact's validity interval if it is still open. ARGV: prefix, key, at, successor ("" for
-- none: a retraction). Returns 1 if this call closed it.
local h = P .. 'f:' .. ARGV[2]
if redis.call('EXISTS', h) == 0 or redis.call('HEXISTS', h, 'invalid_at') == 1 then return 0 end
redis.call('HSET', h, 'invalid_at', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', h, 'superseded_by', ARGV[4]) end
return 1
