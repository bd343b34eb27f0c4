-- ARGV: prefix, fact key, fields (JSON of strings or null). Insertion order is kept in "facts".
local key = ARGV[2]
local fields = hset_args(ARGV[3])
if redis.call('EXISTS', P .. 'f:' .. key) == 1 then
  return redis.error_reply('fact ' .. key .. ' already exists')
end
redis.call('HSET', P .. 'f:' .. key, unpack(fields))
redis.call('ZADD', P .. 'facts', redis.call('INCR', P .. 'fseq'), key)
return 1
