-- Mark a task left by a dead process. ARGV: prefix, id, owner ('' matches a record without
-- one), updated_at, error. Iff the task is queued or running and its owner is that owner: state
-- `interrupted`, the error and the time set, and the updated hash returned (flat); else nil.
local id = ARGV[2]
local h = P .. 't:' .. id
local state = redis.call('HGET', h, 'state')
if state ~= 'queued' and state ~= 'running' then return false end
local owner = redis.call('HGET', h, 'owner') or ''
if owner ~= ARGV[3] then return false end
redis.call('HSET', h, 'state', 'interrupted', 'error', ARGV[5], 'updated_at', ARGV[4])
redis.call('ZREM', P .. 'topen', id)
return redis.call('HGETALL', h)
