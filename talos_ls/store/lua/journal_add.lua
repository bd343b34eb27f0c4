-- Append a live annotation. ARGV: prefix, id, fields (JSON of strings or null).
local id = ARGV[2]
redis.call('HSET', P .. 'j:' .. id, unpack(hset_args(ARGV[3])))
redis.call('ZADD', P .. 'journal', redis.call('INCR', P .. 'jseq'), id)
return 1
