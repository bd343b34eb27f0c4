-- Delete settled proposals beyond the newest `keep` by (updated_at, id), but an applied one of a
-- task that still has a proposal kept: a task's applied ones go together (a rewind finds all of
-- them or none). ARGV: prefix, keep. Returns the deleted ids (the caller drops their locators).
local keep = tonumber(ARGV[2])
local old = redis.call('ZRANGE', P .. 'psettled', 0, -(keep + 1))
local is_old, kept_tasks = {}, {}
for _, id in ipairs(old) do is_old[id] = true end
for _, id in ipairs(redis.call('ZRANGE', P .. 'proposals', 0, -1)) do
  if not is_old[id] then
    local task = redis.call('HGET', P .. 'p:' .. id, 'task_id')
    if task then kept_tasks[task] = true end
  end
end
local ids = {}
for _, id in ipairs(old) do
  local p = redis.call('HMGET', P .. 'p:' .. id, 'status', 'task_id')
  if not (p[1] == 'applied' and p[2] and kept_tasks[p[2]]) then
    redis.call('DEL', P .. 'p:' .. id)
    redis.call('ZREM', P .. 'proposals', id)
    redis.call('ZREM', P .. 'psettled', id)
    ids[#ids + 1] = id
  end
end
if #ids > 0 then redis.call('INCR', P .. 'pstamp') end
return ids
