-- The capped-Bayesian rule, applied atomically to one agent's facts. ARGV: prefix, cap,
-- observations (JSON: fact key -> [signal, ...]). Same arithmetic as memory/confidence.py:
-- c' = clamp01(c + (s - c) / (min(n + 1, cap) + 1)). Confidence is stored with 17 significant
-- digits, so it reads back bit for bit. Returns {key, fields, key, fields, ...}.
local cap = tonumber(ARGV[2])
local out = {}
for key, signals in pairs(cjson.decode(ARGV[3])) do
  local h = P .. 'f:' .. key
  if redis.call('EXISTS', h) == 1 then
    local v = redis.call('HMGET', h, 'confidence', 'evidence_count', 'corroborations',
                         'contradictions')
    local c, n, co, ct = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
    for _, s in ipairs(signals) do
      c = c + (s - c) / (math.min(n + 1, cap) + 1)
      if c > 1.0 then c = 1.0 end
      if c < 0.0 then c = 0.0 end
      n = n + 1
      if s >= 0.5 then co = co + 1 else ct = ct + 1 end
    end
    redis.call('HSET', h, 'confidence', string.format('%.17g', c), 'evidence_count', int(n),
               'corroborations', int(co), 'contradictions', int(ct))
    out[#out + 1] = key
    out[#out + 1] = redis.call('HGETALL', h)
  end
end
return out
