-- A step of a task: its fields set and messages added to its transcript. ARGV: prefix, id,
-- created_at, fields (JSON of strings or null, without `transcript`), at, then the messages.
-- Only when the record was written by `task_put` (its `transcript` field '[]', the messages in
-- `tm:<id>`) and holds `at` messages: 1. Else nothing changes and 0 (the caller writes it whole).
local h = P .. 't:' .. ARGV[2]
local m = P .. 'tm:' .. ARGV[2]
if redis.call('HGET', h, 'transcript') ~= '[]' then return 0 end
if redis.call('LLEN', m) ~= tonumber(ARGV[5]) then return 0 end
local fields = cjson.decode(ARGV[4])
for k, v in pairs(fields) do
  if v == cjson.null then
    redis.call('HDEL', h, k)
  else
    redis.call('HSET', h, k, v)
  end
end
push_all(m, 6)
task_index(ARGV[2], ARGV[3], fields.state)
return 1
