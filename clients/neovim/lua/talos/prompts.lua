-- Questions and permission prompts, through vim.ui.select, never blocking the editor.
--
-- The plugin asks the server for deferred prompts (initializationOptions.deferredPrompts):
-- each comes as the notification `talos/prompt {prompt_id, kind, message, actions}`; it is
-- offered through vim.ui.select once Neovim is idle (never inside the handler), one at a time,
-- and the choice goes back with `talos.prompt.answer {prompt_id, choice}` (nil: dismissed).
-- The server keeps the task waiting meanwhile, up to its promptTimeout; `talos/promptClosed`
-- drops a prompt that timed out or whose task was cancelled. Any vim.ui.select replacement
-- (telescope, dressing, fzf-lua) is used as it is.
--
-- A `window/showMessageRequest` (a server without deferred prompts): where Neovim runs the
-- handler in a coroutine (0.10+), the handler yields until vim.ui.select has an answer; where
-- handlers are synchronous (0.7), it answers dismissed at once (a dismissal is never an
-- answer: a question is asked again later, a command is denied) and says so.
local compat = require('talos.compat')
local text = require('talos.text')

local M = {}

local open = {} -- prompt id -> { client_id, params }: sent by the server, not answered yet
local queue = {} -- prompt ids waiting for their turn in vim.ui.select
local showing = nil -- the prompt id vim.ui.select shows now

local show_next

local function answer(client_id, prompt_id, choice)
  local client = vim.lsp.get_client_by_id(client_id)
  if not client then
    return
  end
  local argument = { prompt_id = prompt_id, choice = choice }
  compat.request(client, 'workspace/executeCommand',
    { command = 'talos.prompt.answer', arguments = { argument } },
    function(err)
      if err then
        vim.notify('Talos: ' .. text.line(err.message, 200), vim.log.levels.WARN)
      end
    end)
end

--- The message's first line as the picker's prompt; the rest shown before, plain.
local function split_message(message)
  local lines = text.lines(message)
  return lines[1] or '', vim.list_slice(lines, 2)
end

local function offer(prompt_id)
  local entry = open[prompt_id]
  if not entry then
    return show_next()
  end
  showing = prompt_id
  local params = entry.params
  local actions = type(params.actions) == 'table' and params.actions or {}
  local shown = {}
  for i, action in ipairs(actions) do
    shown[i] = { index = i, title = text.line(action, 200) }
  end
  local first, rest = split_message(params.message)
  if #rest > 0 then
    vim.notify(table.concat(vim.list_extend({ 'Talos: ' .. first }, rest), '\n'),
      vim.log.levels.INFO)
  end
  local kind = params.kind == 'permission' and 'talos_permission' or 'talos_question'
  vim.ui.select(shown, {
    prompt = 'Talos: ' .. first,
    kind = kind,
    format_item = function(item) return item.title end,
  }, function(item)
    if showing == prompt_id then
      showing = nil
    end
    if open[prompt_id] then
      open[prompt_id] = nil
      local choice = item and actions[item.index] or nil
      answer(entry.client_id, prompt_id, choice)
    else
      vim.notify('Talos: that prompt had already ended (timed out or its task cancelled)',
        vim.log.levels.WARN)
    end
    vim.schedule(show_next)
  end)
end

show_next = function()
  if showing then
    return
  end
  while #queue > 0 do
    local prompt_id = table.remove(queue, 1)
    if open[prompt_id] then
      return offer(prompt_id)
    end
  end
end

--- `talos/prompt`: queued, offered once Neovim is idle.
function M.prompt_handler(_, params, ctx)
  if type(params) ~= 'table' or type(params.prompt_id) ~= 'string' then
    return vim.NIL
  end
  open[params.prompt_id] = { client_id = ctx.client_id, params = params }
  table.insert(queue, params.prompt_id)
  vim.schedule(show_next)
  return vim.NIL
end

--- `talos/promptClosed`: the prompt ended unanswered; it is not offered any more.
function M.closed_handler(_, params)
  if type(params) == 'table' and type(params.prompt_id) == 'string' then
    open[params.prompt_id] = nil
  end
  return vim.NIL
end

--- The prompts still to answer (for tests and :TalosQuestions).
function M.pending()
  local out = {}
  for id, entry in pairs(open) do
    out[id] = entry.params
  end
  return out
end

--- `window/showMessageRequest`.
function M.message_request_handler(_, params)
  params = type(params) == 'table' and params or {}
  local actions = type(params.actions) == 'table' and params.actions or {}
  local co, is_main = coroutine.running()
  if co and not is_main then -- Neovim runs server requests in a coroutine: wait for the choice
    local first = split_message(params.message)
    vim.schedule(function()
      vim.ui.select(actions, {
        prompt = 'Talos: ' .. first,
        format_item = function(action) return text.line(action.title, 200) end,
      }, function(choice)
        vim.schedule(function() coroutine.resume(co, choice or vim.NIL) end)
      end)
    end)
    return coroutine.yield()
  end
  vim.schedule(function()
    vim.notify('Talos asked (dismissed: this talos-ls cannot take a later answer; update it): '
      .. text.line(params.message, 300), vim.log.levels.WARN)
  end)
  return vim.NIL
end

return M
