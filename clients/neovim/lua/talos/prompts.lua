-- Questions and permission prompts, through vim.ui.select, never blocking the editor.
--
-- The plugin asks the server for deferred prompts (initializationOptions.deferredPrompts):
-- each comes as the notification `talos/prompt {prompt_id, kind, message, actions}`; it is
-- offered through vim.ui.select once Neovim is idle (never inside the handler), one at a time,
-- and the choice goes back with `talos.prompt.answer {prompt_id, choice}` (nil: dismissed).
-- Idle: Normal mode, no prompt or menu on the screen, no key pressed for `prompt_idle_ms`, so
-- a menu never pops up under keys typed for something else (a digit typed as a count could
-- pick an action). Meanwhile the prompt shows in the chat buffer and as a one-line message.
-- With Neovim's own vim.ui.select, the menu is an inputlist() that shows the message's every
-- line above the numbered actions (no echo before it: that would raise a hit-enter prompt).
-- The server keeps the task waiting meanwhile, up to its promptTimeout; `talos/promptClosed`
-- drops a prompt that timed out or whose task was cancelled. Any vim.ui.select replacement
-- (telescope, dressing, fzf-lua) is used as it is.
--
-- A `window/showMessageRequest` (a server without deferred prompts): where Neovim runs the
-- handler in a coroutine (0.10+), the handler yields until vim.ui.select has an answer; where
-- handlers are synchronous (0.7), it answers dismissed at once (a dismissal is never an
-- answer: a question is asked again later, a command is denied) and says so.
local compat = require('talos.compat')
local message = require('talos.message')
local state = require('talos.state')
local text = require('talos.text')

local M = {}

local open = {} -- prompt id -> { client_id, params }: sent by the server, not answered yet
local queue = {} -- prompt ids waiting for their turn in vim.ui.select
local showing = nil -- the prompt id vim.ui.select shows now
local told = {} -- prompt id -> true: "needs you" said while it waited
local last_key = -1e12 -- when a key was last pressed (ms, uv.now)
local watching_keys = false
local poll = nil -- the timer looking for an idle moment
local POLL_MS = 100
local DETAIL_LINES = 15 -- at most this many lines of a message above the menu

local show_next

local function chat()
  return require('talos.chat')
end

local function watch_keys()
  if watching_keys then
    return
  end
  watching_keys = true
  local ns = vim.api.nvim_create_namespace('talos_keys')
  vim.on_key(function() last_key = compat.uv.now() end, ns)
end

--- Whether a menu may open now: Normal mode, nothing on the screen waiting for the person,
--- no key pressed for `prompt_idle_ms`. Else false and why: 'mode' or 'keys'.
function M.idle()
  local mode = vim.api.nvim_get_mode()
  if mode.blocking or (mode.mode ~= 'n' and mode.mode ~= 'nt') then
    return false, 'mode'
  end
  if compat.uv.now() - last_key < (state.config.prompt_idle_ms or 0) then
    return false, 'keys'
  end
  return true
end

local function answer(client_id, prompt_id, choice)
  chat().prompt_done(prompt_id, choice and ('answered: ' .. text.line(choice, 80)) or 'dismissed')
  local client = vim.lsp.get_client_by_id(client_id)
  if not client then
    return
  end
  local argument = { prompt_id = prompt_id, choice = choice }
  compat.request(client, 'workspace/executeCommand',
    { command = 'talos.prompt.answer', arguments = { argument } },
    function(err)
      if err then
        message.say('Talos: ' .. text.line(err.message, 200), vim.log.levels.WARN)
      end
    end)
end

--- The message's first line as the picker's prompt, and the rest; plain.
local function split_message(said)
  local lines = text.lines(said)
  return lines[1] or '', vim.list_slice(lines, 2)
end

-- Neovim's own vim.ui.select is an inputlist() with one prompt line: this one shows every
-- line of the message above the numbered actions. The mouse is off while it shows: a click
-- answers with the number of the LINE clicked, which the lines above would shift.
local function inputlist(first, rest, titles)
  local lines = { 'Talos: ' .. first }
  for i, line in ipairs(rest) do
    if i > DETAIL_LINES then
      table.insert(lines, '  … (the whole message is in :TalosChat)')
      break
    end
    table.insert(lines, '  ' .. line)
  end
  for i, title in ipairs(titles) do
    table.insert(lines, string.format('%d: %s', i, title))
  end
  local mouse = vim.o.mouse
  vim.o.mouse = ''
  pcall(vim.cmd, 'redraw') -- the menu alone at the bottom, no message left above it
  local ok, choice = pcall(vim.fn.inputlist, lines)
  vim.o.mouse = mouse
  pcall(vim.cmd, 'redraw') -- the menu gone, so what is said next is not stacked under it
  choice = ok and tonumber(choice) or 0
  if choice >= 1 and choice <= #titles then
    return choice
  end
  return nil
end

local function offer(prompt_id)
  local entry = open[prompt_id]
  if not entry then
    return show_next()
  end
  showing = prompt_id
  local params = entry.params
  local actions = type(params.actions) == 'table' and params.actions or {}
  local shown, titles = {}, {}
  for i, action in ipairs(actions) do
    titles[i] = text.line(action, 200)
    shown[i] = { index = i, title = titles[i] }
  end
  local first, rest = split_message(params.message)
  local kind = params.kind == 'permission' and 'talos_permission' or 'talos_question'
  local function chosen(index)
    if showing == prompt_id then
      showing = nil
    end
    if open[prompt_id] then
      open[prompt_id] = nil
      answer(entry.client_id, prompt_id, index and actions[index] or nil)
    else
      message.say('Talos: that prompt had already ended (timed out or its task cancelled)',
        vim.log.levels.WARN)
    end
    vim.schedule(show_next)
  end
  if compat.is_builtin(vim.ui.select, 'vim/ui.lua') then
    return chosen(inputlist(first, rest, titles))
  end
  if #rest > 0 and not message.echoes() then -- a notification plugin shows several lines
    vim.notify(table.concat(vim.list_extend({ 'Talos: ' .. first }, rest), '\n'),
      vim.log.levels.INFO, { title = 'Talos' })
  end
  vim.ui.select(shown, {
    prompt = 'Talos: ' .. first,
    kind = kind,
    format_item = function(item) return item.title end,
  }, function(item) chosen(item and item.index or nil) end)
end

local function wait_for_idle()
  if poll then
    return
  end
  poll = compat.uv.new_timer()
  poll:start(POLL_MS, POLL_MS, vim.schedule_wrap(function()
    if showing or #queue == 0 or M.idle() then
      if poll then
        poll:stop()
        poll:close()
        poll = nil
      end
      show_next()
    end
  end))
end

show_next = function()
  if showing then
    return
  end
  while #queue > 0 do
    local prompt_id = queue[1]
    local entry = open[prompt_id]
    if not entry then
      table.remove(queue, 1)
    elseif not M.idle() then
      local _, why = M.idle()
      if why == 'mode' and not told[prompt_id] then
        told[prompt_id] = true
        local first = split_message(entry.params.message)
        message.say('Talos needs you: ' .. first .. ' (the menu opens in Normal mode)')
      end
      return wait_for_idle()
    else
      table.remove(queue, 1)
      told[prompt_id] = nil
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
  vim.schedule(function()
    watch_keys()
    chat().prompt(ctx.client_id, params)
    show_next()
  end)
  return vim.NIL
end

--- `talos/promptClosed`: the prompt ended unanswered; it is not offered any more.
function M.closed_handler(_, params)
  if type(params) == 'table' and type(params.prompt_id) == 'string' then
    if open[params.prompt_id] then
      local reason = text.line(params.reason, 40)
      vim.schedule(function()
        chat().prompt_done(params.prompt_id, 'closed' .. (reason ~= '' and (': ' .. reason) or ''))
      end)
    end
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
  message.say('Talos asked (dismissed: this talos-ls cannot take a later answer; update it): '
    .. text.line(params.message, 300), vim.log.levels.WARN)
  return vim.NIL
end

return M
