-- Prepended to every Talos script. ARGV[1] is the agent's key prefix "talos:{<agent>}:", so
-- every key a script touches carries the agent's hash tag and Redis Cluster keeps an agent on
-- one slot. Candidate hashes hold strings: integers in decimal, lists as JSON, absent = NULL.
--
-- Indexes, all derived from a candidate's fields by `indexes` and kept in step by `reindex`:
--   impact  zset, lexicographic members "<1e15 - last_seen>:<ask_count>:<created + 1e15>:<id>"
--           for pending and cooled candidates: impact order is member order
--   exp     zset id -> expires_turn, pending and cooled
--   dlv     zset id -> coalesce(delivered_turn, created_turn), delivered
--   cue:<t> set of open candidates (pending, cooled, delivered) with cue token t
-- and, kept until prune: ids (zset id -> created_turn), key:<k>, text:<sha1 of normalized text>.
local P = ARGV[1]
local OFF = 1000000000000000

local function int(v)
  return string.format('%d', v)
end

local function num(v)
  if v == nil or v == false or v == '' then return nil end
  return tonumber(v)
end

local function load(id)
  local flat = redis.call('HGETALL', P .. 'c:' .. id)
  if #flat == 0 then return nil end
  local c = {}
  for i = 1, #flat, 2 do c[flat[i]] = flat[i + 1] end
  return c
end

-- JSON {field: string or null} -> HSET arguments, nulls left out.
local function hset_args(json)
  local fields = {}
  for k, v in pairs(cjson.decode(json)) do
    if v ~= cjson.null then
      fields[#fields + 1] = k
      fields[#fields + 1] = v
    end
  end
  return fields
end

local function flatten(c)
  local out = {}
  for k, v in pairs(c) do
    out[#out + 1] = k
    out[#out + 1] = v
  end
  return out
end

local function deliverable(s)
  return s == 'pending' or s == 'cooled'
end

local function is_open(s)
  return s == 'pending' or s == 'cooled' or s == 'delivered'
end

local function impact_member(c)
  return string.format('%016d:%08d:%016d:', OFF - tonumber(c.last_seen_turn),
    tonumber(c.ask_count), tonumber(c.created_turn) + OFF) .. c.candidate_id
end

local function indexes(c)
  local ix = { open = false }
  if c == nil then return ix end
  if deliverable(c.status) then
    ix.impact = impact_member(c)
    ix.exp = tonumber(c.expires_turn)
  end
  if c.status == 'delivered' then
    ix.dlv = num(c.delivered_turn) or tonumber(c.created_turn)
  end
  ix.open = is_open(c.status)
  return ix
end

local function reindex(id, before, after)
  local a, b = indexes(before), indexes(after)
  if a.impact ~= b.impact then
    if a.impact then redis.call('ZREM', P .. 'impact', a.impact) end
    if b.impact then redis.call('ZADD', P .. 'impact', 0, b.impact) end
  end
  for _, name in ipairs({ 'exp', 'dlv' }) do
    if a[name] ~= b[name] then
      if b[name] then
        redis.call('ZADD', P .. name, b[name], id)
      else
        redis.call('ZREM', P .. name, id)
      end
    end
  end
  if a.open ~= b.open then
    for _, cue in ipairs(cjson.decode((after or before).cue_tokens)) do
      if b.open then
        redis.call('SADD', P .. 'cue:' .. cue, id)
      else
        redis.call('SREM', P .. 'cue:' .. cue, id)
      end
    end
  end
end

-- Apply `changes` (field -> string, or false to clear) to candidate `c` and its indexes.
local function update(id, c, changes)
  local before = {}
  for k, v in pairs(c) do before[k] = v end
  local hset, hdel = {}, {}
  for k, v in pairs(changes) do
    if v == false then
      c[k] = nil
      hdel[#hdel + 1] = k
    else
      c[k] = v
      hset[#hset + 1] = k
      hset[#hset + 1] = v
    end
  end
  if #hset > 0 then redis.call('HSET', P .. 'c:' .. id, unpack(hset)) end
  if #hdel > 0 then redis.call('HDEL', P .. 'c:' .. id, unpack(hdel)) end
  reindex(id, before, c)
end

-- Open and not, in effect, expired at `turn`: a delivered candidate waits for its reply until
-- it has been ignored for C turns; only then can expiry reach it.
local function live_open(c, turn, C)
  if deliverable(c.status) then return tonumber(c.expires_turn) >= turn end
  if c.status == 'delivered' then
    local since = num(c.delivered_turn) or tonumber(c.created_turn)
    return not (tonumber(c.expires_turn) < turn and since + C <= turn)
  end
  return false
end

-- Cool ignored delivered candidates, then expire pending and cooled ones past expiry.
local function sweep(turn, C)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'dlv', '-inf', turn - C)) do
    local c = load(id)
    if c and c.status == 'delivered' then
      local since = num(c.delivered_turn) or tonumber(c.created_turn)
      if since + C <= turn then
        update(id, c, { status = 'cooled', cooldown_until = int(since + C),
                        resolved_turn = int(turn) })
      end
    end
  end
  local expired = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'exp', '-inf', '(' .. int(turn))) do
    local c = load(id)
    if c and deliverable(c.status) and tonumber(c.expires_turn) < turn then
      update(id, c, { status = 'expired', resolved_turn = int(turn) })
      expired = expired + 1
    end
  end
  return expired
end

local function budget_open(turn, K)
  local last = redis.call('GET', P .. 'bucket')
  return (not last) or turn >= tonumber(last) + K
end

-- Grant and claim: the first of `ids` still deliverable at `turn`. The caller checked the
-- budget in this same script.
local function deliver_first(ids, turn)
  for _, id in ipairs(ids) do
    local c = load(id)
    if c and deliverable(c.status) and tonumber(c.expires_turn) >= turn
        and (num(c.cooldown_until) == nil or num(c.cooldown_until) <= turn) then
      update(id, c, { status = 'delivered', ask_count = int(tonumber(c.ask_count) + 1),
                      delivered_turn = int(turn), resolved_turn = false })
      redis.call('SET', P .. 'bucket', int(turn))
      return c
    end
  end
  return nil
end

-- A task's place in the indexes: `tasks` (zset by created_at) holds them all, `topen` the
-- queued and running ones (what a starting process checks for owners that died).
local function task_index(id, created_at, state)
  redis.call('ZADD', P .. 'tasks', created_at, id)
  if state == 'queued' or state == 'running' then
    redis.call('ZADD', P .. 'topen', created_at, id)
  else
    redis.call('ZREM', P .. 'topen', id)
  end
end

-- Messages ARGV[first..] to the end of the list `key`, a thousand a call (Lua's unpack is
-- bounded).
local function push_all(key, first)
  for i = first, #ARGV, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
