-- Append a live annotation. ARGV: prefix, id, fields (JSON of strings or null).
local id = ARGV[2]
local fields = {}
for k, v in pairs(cjson.decode(ARGV[3])) do
  if v ~= cjson.null then
    fields[#fields + 1] = k
    fields[#fields + 1] = v
  end
end
redis.call('HSET', P .. 'j:' .. id, unpack(fields))
redis.call('ZADD', P .. 'journal', redis.call('INCR', P .. 'jseq'), id)
return 1
