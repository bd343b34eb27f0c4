-- The ids of the agent's queued and running tasks, oldest first. ARGV: prefix. Records written
-- before `topen` existed are indexed once, on the first call (the marker `topen:v`).
if redis.call('EXISTS', P .. 'topen:v') == 0 then
  local all = redis.call('ZRANGE', P .. 'tasks', 0, -1, 'WITHSCORES')
  for i = 1, #all, 2 do
    local state = redis.call('HGET', P .. 't:' .. all[i], 'state')
    if state == 'queued' or state == 'running' then
      redis.call('ZADD', P .. 'topen', all[i + 1], all[i])
    end
  end
  redis.call('SET', P .. 'topen:v', '1')
end
return redis.call('ZRANGE', P .. 'topen', 0, -1)
