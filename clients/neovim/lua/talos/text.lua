-- Text from the server (task titles, questions, file names, messages) comes from a hostile model
-- or workspace: it is shown as plain text only. Control characters (terminal escapes among
-- them), C1 controls, bidi overrides and isolates, zero-width and invisible characters, and
-- line separators are shown as escapes; where one line is expected, so are line breaks.
local M = {}

-- Code points shown as \uXXXX: bidi marks, embeddings, overrides and isolates, zero-width
-- and invisible formatting, line and paragraph separators, the byte order mark.
local INVISIBLE = { 0x061C, 0xFEFF }
for cp = 0x200B, 0x200F do table.insert(INVISIBLE, cp) end
for cp = 0x2028, 0x202E do table.insert(INVISIBLE, cp) end
for cp = 0x2060, 0x2064 do table.insert(INVISIBLE, cp) end
for cp = 0x2066, 0x206F do table.insert(INVISIBLE, cp) end

local function utf8(cp)
  if cp < 0x800 then
    return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40)
  end
  return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40,
                     0x80 + cp % 0x40)
end

local ESCAPES = {}
for _, cp in ipairs(INVISIBLE) do
  ESCAPES[utf8(cp)] = string.format('\\u%04x', cp)
end

local function hex(c)
  return string.format('\\x%02x', c:byte())
end

--- Text made inert: every control character but newline and tab escaped (those too, and the
--- result is then one line, when `one_line`). Anything not a string or number is ''.
function M.plain(value, one_line)
  if type(value) == 'number' then
    value = tostring(value)
  elseif type(value) ~= 'string' then
    return ''
  end
  local s = value
  if one_line then
    s = s:gsub('\r\n', '\\n'):gsub('\n', '\\n'):gsub('\t', '\\t')
  end
  s = s:gsub('[%z\1-\8\11-\31\127]', hex) -- tabs stay in text of several lines
  s = s:gsub('\194([\128-\159])', hex) -- C1 controls, UTF-8 encoded
  for raw, shown in pairs(ESCAPES) do
    s = s:gsub(raw, shown)
  end
  return s
end

--- One line of plain text, at most `max` characters (an ellipsis marks the cut).
function M.line(value, max)
  local s = M.plain(value, true)
  if max and vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. '…'
  end
  return s
end

--- Plain text cut into lines (for a buffer: nvim_buf_set_lines takes no newline in a line).
function M.lines(value)
  if type(value) == 'string' then
    value = value:gsub('\r\n', '\n')
  end
  local s = M.plain(value, false)
  local out = vim.split(s, '\n', { plain = true })
  if #out > 1 and out[#out] == '' then
    table.remove(out)
  end
  return out
end

--- `value` cut to at most `width` display cells (an ellipsis marks the cut, then `suffix`
--- when there is room for it): a message that never wraps. Returns the text and whether it
--- was cut.
function M.fit(value, width, suffix)
  width = math.max(width or 0, 1)
  if vim.fn.strdisplaywidth(value) <= width then
    return value, false
  end
  local tail = '…' .. ((suffix and width >= 3 * vim.fn.strdisplaywidth(suffix)) and suffix or '')
  local room = width - vim.fn.strdisplaywidth(tail)
  local n = vim.fn.strchars(value)
  local lo, hi = 0, n -- the longest prefix of lo characters that fits in room
  while lo < hi do
    local mid = math.ceil((lo + hi) / 2)
    if vim.fn.strdisplaywidth(vim.fn.strcharpart(value, 0, mid)) <= room then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return vim.fn.strcharpart(value, 0, lo) .. tail, true
end

--- `s` split before an incomplete UTF-8 sequence (or a lone carriage return) at its end:
--- the complete part, and the bytes to hold until the next piece of a stream arrives.
function M.complete(s)
  if s:sub(-1) == '\r' then
    local head, held = M.complete(s:sub(1, -2))
    return head, held .. '\r'
  end
  for back = 1, math.min(3, #s) do
    local byte = s:byte(#s - back + 1)
    if byte < 0x80 then
      return s, ''
    elseif byte >= 0xC0 then -- the lead byte of the last sequence
      local need = byte >= 0xF0 and 4 or byte >= 0xE0 and 3 or 2
      if back < need then
        return s:sub(1, #s - back), s:sub(#s - back + 1)
      end
      return s, ''
    end
  end
  return s, ''
end

--- One line for a statusline: plain, and '%' doubled so nothing in it is an item.
function M.statusline(value, max)
  return (M.line(value, max):gsub('%%', '%%%%'))
end

return M
