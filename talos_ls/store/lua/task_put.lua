-- Create or replace a task record. ARGV: prefix, id, created_at, fields (JSON of strings or null).
local h = P .. 't:' .. ARGV[2]
redis.call('DEL', h)
redis.call('HSET', h, unpack(hset_args(ARGV[4])))
redis.call('ZADD', P .. 'tasks', ARGV[3], ARGV[2])
return 1
