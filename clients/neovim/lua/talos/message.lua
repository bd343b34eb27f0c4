-- Talos's own messages, never a hit-enter prompt ("Press ENTER or type command to continue"),
-- which would eat the next keys.
--
-- With Neovim's own vim.notify (which echoes, and prompts for a message of several lines or one
-- wider than the screen), each message is echoed as ONE line cut to the space the command line
-- has (v:echospace), into :messages as shown; the whole text is kept for :TalosMessages.
-- A message waits while Neovim is in a prompt or a menu (a message echoed under it would leave a
-- hit-enter prompt once it closes) or while a command line is typed, and the screen is redrawn
-- first, so it never stacks under an earlier one. A vim.notify replaced by a plugin
-- (nvim-notify, fidget, noice...) gets the whole text, as it can show it.
local compat = require('talos.compat')
local text = require('talos.text')

local M = {}

local LOG_MAX = 1000 -- messages kept for :TalosMessages
local POLL_MS = 100 -- how often waiting messages look for their moment
local MORE = ' (:TalosMessages)' -- after a cut message, when there is room for it
local HIGHLIGHT = { [vim.log.levels.ERROR] = 'ErrorMsg', [vim.log.levels.WARN] = 'WarningMsg' }

M.log = {} -- { time, level, text }: every message, whole
local queue = {} -- messages waiting to be echoed
local timer = nil

--- Whether Neovim shows its own notifications (then Talos echoes its one-line form).
function M.echoes()
  return compat.is_builtin(vim.notify, 'vim/_editor.lua')
end

--- Whether something on the screen waits for the person: a prompt, a menu (inputlist, input,
--- confirm, hit-enter, more) or a command line being typed.
function M.busy()
  local mode = vim.api.nvim_get_mode()
  local m = mode.mode:sub(1, 1)
  return mode.blocking or m == 'c' or m == 'r'
end

--- The one line a message is echoed as: its first line, cut to the command line's room.
function M.one_line(message, width)
  local lines = text.lines(message)
  local first = lines[1] or ''
  width = width or vim.v.echospace
  if not width or width <= 0 then
    width = vim.o.columns - 12
  end
  local several = #lines > 1
  local shown, cut = text.fit(several and (first .. ' …') or first, width, MORE)
  if several and not cut and vim.fn.strdisplaywidth(shown .. MORE) <= width then
    shown = shown .. MORE
  end
  return shown
end

local function arm()
  if timer then
    return
  end
  timer = compat.uv.new_timer()
  timer:start(POLL_MS, POLL_MS, vim.schedule_wrap(function()
    if #queue == 0 or not M.busy() then
      if timer then
        timer:stop()
        timer:close()
        timer = nil
      end
      M.flush()
    end
  end))
end

--- Echo the waiting messages (each replaces the one before on the command line; all go into
--- :messages), or wait while the person is in a prompt or typing a command.
function M.flush()
  if #queue == 0 then
    return
  end
  if M.busy() then
    return arm()
  end
  local waiting = queue
  queue = {}
  for _, entry in ipairs(waiting) do
    -- A redraw before each: a message echoed after another without one (in one callback, or
    -- after a menu, until a key is pressed) goes on a new line, and two lines prompt.
    pcall(vim.cmd, 'redraw')
    pcall(vim.api.nvim_echo, { { M.one_line(entry.text), HIGHLIGHT[entry.level] } }, true, {})
  end
end

--- Say `message` (plain text; several lines allowed) at `level` (vim.log.levels).
function M.say(message, level)
  level = level or vim.log.levels.INFO
  message = type(message) == 'string' and message or tostring(message)
  table.insert(M.log, { time = os.time(), level = level, text = message })
  if #M.log > LOG_MAX then
    table.remove(M.log, 1)
  end
  if not M.echoes() then
    vim.notify(message, level, { title = 'Talos' })
    return
  end
  table.insert(queue, { text = message, level = level })
  vim.schedule(M.flush)
end

local LEVEL_NAMES = { [vim.log.levels.ERROR] = 'error', [vim.log.levels.WARN] = 'warning' }

--- :TalosMessages: every message of this session, whole, in a scratch buffer.
function M.show()
  local lines = {}
  for _, entry in ipairs(M.log) do
    local head = os.date('%H:%M:%S', entry.time) .. ' '
    local level = LEVEL_NAMES[entry.level]
    if level then
      head = head .. level .. ': '
    end
    for i, line in ipairs(text.lines(entry.text)) do
      table.insert(lines, (i == 1 and head or string.rep(' ', 9)) .. line)
    end
  end
  if #lines == 0 then
    lines = { 'No message from Talos yet.' }
  end
  return lines
end

return M
