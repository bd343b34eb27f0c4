-- Create or replace a task record. ARGV: prefix, id, created_at, fields (JSON of strings or
-- null; `transcript` is '[]'), then the transcript's messages, one JSON text each: the list
-- `tm:<id>`, which `task_append` adds to.
local h = P .. 't:' .. ARGV[2]
local m = P .. 'tm:' .. ARGV[2]
local fields = cjson.decode(ARGV[4])
redis.call('DEL', h, m)
redis.call('HSET', h, unpack(hset_args(ARGV[4])))
push_all(m, 5)
task_index(ARGV[2], ARGV[3], fields.state)
return 1
