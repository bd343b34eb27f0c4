-- Create or replace a task record. ARGV: prefix, id, created_at, fields (JSON of strings or null).
-- `topen` (zset by created_at) holds the agent's queued and running tasks: what a starting
-- process checks for owners that died.
local h = P .. 't:' .. ARGV[2]
local fields = cjson.decode(ARGV[4])
redis.call('DEL', h)
redis.call('HSET', h, unpack(hset_args(ARGV[4])))
redis.call('ZADD', P .. 'tasks', ARGV[3], ARGV[2])
if fields.state == 'queued' or fields.state == 'running' then
  redis.call('ZADD', P .. 'topen', ARGV[3], ARGV[2])
else
  redis.call('ZREM', P .. 'topen', ARGV[2])
end
return 1
