-- Prepended (after _lib.lua) to every proposal script. A proposed edit is the hash
-- P .. 'p:<id>' of strings (integers in decimal, floats as Python's repr, lists as JSON,
-- absent = NULL), indexed by
--   proposals  zset id -> created_at: every proposal, in (created_at, id) order
--   psettled   zset id -> updated_at: settled proposals (all but pending and partly_applied,
--              which are still to review), for prune
--   pstamp     a counter every put, claim and prune moves: other servers poll it
-- Scores are passed on as the strings Python wrote, so they round-trip exactly.

local function proposal_index(id, p)
  redis.call('INCR', P .. 'pstamp')
  redis.call('ZADD', P .. 'proposals', p.created_at, id)
  if p.status == 'pending' or p.status == 'partly_applied' then
    redis.call('ZREM', P .. 'psettled', id)
  else
    redis.call('ZADD', P .. 'psettled', p.updated_at, id)
  end
end
