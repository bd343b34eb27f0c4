-- `$/progress` of Talos's tasks (tokens `talos/task/<id>`) as one-line messages (talos.message):
-- the begin and the end always (the end is the chat's own message where the server sends the
-- conversation), reports at most every `progress_interval_ms`. Neovim's own handler runs
-- first, so `vim.lsp.util.get_progress_messages()`, LspProgressUpdate/LspProgress and
-- fidget.nvim see everything; with fidget.nvim present, it alone shows progress.
local compat = require('talos.compat')
local message = require('talos.message')
local state = require('talos.state')
local text = require('talos.text')

local M = {}

local titles = {} -- token -> the task's title
local last = {} -- token -> when its last report was shown (ms)

local has_fidget = nil

local function fidget()
  if has_fidget == nil then
    has_fidget = package.loaded['fidget'] ~= nil or (pcall(require, 'fidget'))
  end
  return has_fidget
end

function M.handler(err, result, ctx, config)
  local default = vim.lsp.handlers['$/progress']
  if default and default ~= M.handler then
    pcall(default, err, result, ctx, config)
  end
  if err or type(result) ~= 'table' or type(result.value) ~= 'table' then
    return vim.NIL
  end
  local token = result.token
  if type(token) ~= 'string' or token:sub(1, 11) ~= 'talos/task/' then
    return vim.NIL
  end
  if not state.config.progress or fidget() then
    return vim.NIL
  end
  local value = result.value
  local now = compat.uv.now()
  if value.kind == 'begin' then
    titles[token] = text.line(value.title, 80)
    last[token] = now
    message.say(titles[token] .. (value.message and (': ' .. text.line(value.message, 120)) or ''))
  elseif value.kind == 'report' then
    local interval = state.config.progress_interval_ms or 0
    if now - (last[token] or 0) >= interval then
      last[token] = now
      message.say((titles[token] or 'Talos') .. ': ' .. text.line(value.message, 120))
    end
  elseif value.kind == 'end' then
    if not state.conversation[ctx.client_id] then -- else the chat says it, with its way there
      message.say((titles[token] or 'Talos') .. ': ' .. text.line(value.message, 120))
    end
    titles[token], last[token] = nil, nil
  end
  return vim.NIL
end

return M
