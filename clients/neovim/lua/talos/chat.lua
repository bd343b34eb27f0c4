-- The chat buffer: every task of the Talos clients as the server streams it
-- (`talos/conversation` events: begin, text, step, proposal, end), the prompts it asks, and a
-- follow-up sent from it. A plain scratch buffer in a normal split: no floating window, no
-- dependency.
--
-- Everything in it comes from a model or a workspace that may be hostile, so it is plain text
-- only: control characters shown as escapes (text.lua), no filetype, syntax or conceal to
-- interpret it, 'modeline' off, folds manual; highlights come from the plugin's own extmarks,
-- never from the text, so a line of model text that looks like a header is not one.
local message = require('talos.message')
local state = require('talos.state')
local status = require('talos.status')
local text = require('talos.text')

local M = {}

M.NAME = 'Talos chat'
M.FILETYPE = 'talos_chat'
local HELP = 'Talos chat · i follow up · <CR> on a proposal: diff, else follow up'
  .. ' · ga apply · gr reject · <C-c> cancel · q close'

local ns = vim.api.nvim_create_namespace('talos_chat') -- highlights
local marks_ns = vim.api.nvim_create_namespace('talos_chat_marks') -- lines we update

local buf = nil
local tasks = {} -- task id -> { client_id, title, held, since_step, ended }
local latest = nil -- { task_id, client_id }: the last task begun
local tail = nil -- what the last line is: { kind, task_id, step }
local proposal_marks = {} -- proposal id -> extmark id of its line
local prompt_marks = {} -- prompt id -> extmark id of its status line
local at_mark = {} -- extmark id -> { proposal_id, client_id }

local HIGHLIGHTS = {
  TalosChatHeader = 'Title',
  TalosChatStep = 'Comment',
  TalosChatProposal = 'Identifier',
  TalosChatPrompt = 'Question',
  TalosChatEnd = 'Special',
  TalosChatError = 'ErrorMsg',
  TalosChatHelp = 'Comment',
}
for group, link in pairs(HIGHLIGHTS) do
  vim.cmd(string.format('highlight default link %s %s', group, link))
end

-- ------------------------------------------------------------------ the buffer
local function window_options(win)
  local wo = vim.wo[win]
  wo.wrap = true
  wo.linebreak = true
  wo.list = false
  wo.spell = false
  wo.number = false
  wo.relativenumber = false
  wo.foldmethod = 'manual' -- no fold marker or expression in the text does anything
  wo.foldenable = false
  wo.conceallevel = 0
end

local keymaps -- set below

local function ensure()
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  local bo = vim.bo[buf]
  bo.buftype = 'nofile'
  bo.bufhidden = 'hide' -- closing the window keeps the conversation
  bo.swapfile = false
  bo.modeline = false
  bo.undolevels = -1
  pcall(vim.api.nvim_buf_set_name, buf, M.NAME)
  bo.filetype = M.FILETYPE
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { HELP })
  vim.api.nvim_buf_add_highlight(buf, ns, 'TalosChatHelp', 0, 0, -1)
  bo.modifiable = false
  bo.modified = false
  keymaps(buf)
  vim.api.nvim_create_autocmd('BufWinEnter', {
    buffer = buf,
    callback = function() window_options(vim.api.nvim_get_current_win()) end,
  })
  tail, proposal_marks, prompt_marks, at_mark = nil, {}, {}, {} -- a new buffer: no line yet
  return buf
end

--- Change the buffer through `fn(b)`; the windows whose cursor was on its last line follow
--- what is added.
local function edit(fn)
  local b = ensure()
  local last = vim.api.nvim_buf_line_count(b)
  local follow = {}
  for _, win in ipairs(vim.fn.win_findbuf(b)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= last then
      table.insert(follow, win)
    end
  end
  vim.bo[b].modifiable = true
  local ok, err = pcall(fn, b)
  vim.bo[b].modifiable = false
  vim.bo[b].modified = false
  local count = vim.api.nvim_buf_line_count(b)
  for _, win in ipairs(follow) do
    pcall(vim.api.nvim_win_set_cursor, win, { count, 0 })
  end
  if not ok then
    error(err, 0)
  end
end

-- New lines at the end, each with its highlight (or none); the first line's index (0-based).
-- The empty line a text ending with a line break left open is taken by the first.
local function append(lines, group)
  local first
  edit(function(b)
    first = vim.api.nvim_buf_line_count(b)
    local open = vim.api.nvim_buf_get_lines(b, first - 1, first, false)[1]
    if tail and tail.kind == 'text' and open == '' then
      first = first - 1
      vim.api.nvim_buf_set_lines(b, first, first + 1, false, lines)
    else
      vim.api.nvim_buf_set_lines(b, -1, -1, false, lines)
    end
    if group then
      for i = first, first + #lines - 1 do
        vim.api.nvim_buf_add_highlight(b, ns, group, i, 0, -1)
      end
    end
  end)
  return first
end

local function set_line(row, line, group)
  edit(function(b)
    vim.api.nvim_buf_set_lines(b, row, row + 1, false, { line })
    if group then
      vim.api.nvim_buf_add_highlight(b, ns, group, row, 0, -1)
    end
  end)
end

local function mark(row)
  return vim.api.nvim_buf_set_extmark(ensure(), marks_ns, row, 0, {})
end

local function mark_row(id)
  local pos = vim.api.nvim_buf_get_extmark_by_id(ensure(), marks_ns, id, {})
  return pos and pos[1]
end

local function blank_line()
  local b = ensure()
  local count = vim.api.nvim_buf_line_count(b)
  if vim.api.nvim_buf_get_lines(b, count - 1, count, false)[1] ~= '' then
    append({ '' })
  end
  tail = { kind = 'blank' } -- kept: what comes next goes after it
end

-- ------------------------------------------------------------------ the events
local function task_of(event, client_id)
  local id = text.line(event.task_id, 80)
  local task = tasks[id]
  if not task then
    task = { id = id, client_id = client_id, title = '', held = '', since_step = '' }
    tasks[id] = task
  end
  return task
end

-- Before a line of task `task_id`: when the last line is another task's (tasks run side by
-- side), a line saying whose this is.
local function speaker(task_id)
  if task_id and tail and tail.task_id and tail.task_id ~= task_id then
    append({ '  … ' .. task_id .. ':' }, 'TalosChatStep')
    tail = { kind = 'speaker', task_id = task_id }
  end
end

local function begin(task, event)
  task.title = text.line(event.title, 300)
  latest = { task_id = task.id, client_id = task.client_id }
  blank_line()
  local follows = type(event.follows) == 'string' and text.line(event.follows, 80) or nil
  local head = follows and ('▍follow-up ' .. task.id .. ' (after ' .. follows .. '): ')
    or ('▍task ' .. task.id .. ': ')
  append({ head .. task.title }, 'TalosChatHeader')
  tail = { kind = 'begin', task_id = task.id }
end

-- A piece of the model's text: appended to the task's open paragraph. An incomplete UTF-8
-- sequence (or a carriage return) at the end waits for the next piece.
local function add_text(task, piece)
  if type(piece) ~= 'string' or piece == '' then
    return
  end
  local complete
  complete, task.held = text.complete(task.held .. piece)
  if complete == '' then
    return
  end
  task.since_step = task.since_step .. complete
  local unix = complete:gsub('\r\n', '\n')
  local parts = vim.split(text.plain(unix, false), '\n', { plain = true })
  local continues = tail and tail.kind == 'text' and tail.task_id == task.id
  if not continues then
    speaker(task.id)
  end
  edit(function(b)
    if continues then
      local count = vim.api.nvim_buf_line_count(b)
      local last = vim.api.nvim_buf_get_lines(b, count - 1, count, false)[1] or ''
      parts[1] = last .. parts[1]
      vim.api.nvim_buf_set_lines(b, count - 1, count, false, parts)
    else
      vim.api.nvim_buf_set_lines(b, -1, -1, false, parts)
    end
  end)
  tail = { kind = 'text', task_id = task.id }
end

local function add_step(task, said)
  local line = '  › ' .. text.line(said, 300)
  local step = type(said) == 'string' and said:match('^step (%d+)') or nil
  if tail and tail.kind == 'step' and tail.task_id == task.id and step and tail.step == step then
    set_line(vim.api.nvim_buf_line_count(ensure()) - 1, line, 'TalosChatStep')
  else
    speaker(task.id)
    append({ line }, 'TalosChatStep')
  end
  task.since_step = ''
  tail = { kind = 'step', task_id = task.id, step = step }
end

local OPEN = { pending = true, partly_applied = true }

local function proposal_line(p)
  local hunks = tonumber(p.hunks) or 0
  local line = string.format('  ◆ proposal %s · %s · %d change%s · %s', text.line(p.id, 40),
    text.line(p.path, 200), hunks, hunks == 1 and '' or 's', text.line(p.status, 30))
  if OPEN[p.status] then
    line = line .. '   (<CR> diff · ga apply · gr reject)'
  end
  return line
end

local function add_proposal(task, p)
  if type(p) ~= 'table' or type(p.id) ~= 'string' then
    return
  end
  local existing = proposal_marks[p.id]
  local row = existing and mark_row(existing)
  if row then
    set_line(row, proposal_line(p), 'TalosChatProposal')
    return
  end
  speaker(task.id)
  row = append({ proposal_line(p) }, 'TalosChatProposal')
  local id = mark(row)
  proposal_marks[p.id] = id
  at_mark[id] = { proposal_id = p.id, client_id = task.client_id }
  tail = { kind = 'proposal', task_id = task.id }
end

local function short(title)
  return text.fit(title, 40)
end

local function finish(task, event)
  task.ended = true
  local said = text.line(event.state, 20)
  local spent = { said }
  local tokens = tonumber(event.tokens)
  if tokens then
    table.insert(spent, status.tokens(tokens))
  end
  if tonumber(event.cost) then
    -- estimated: the endpoint reported no usage (a call cut short), counted from the text
    local estimated = event.estimated == true and ' (estimated)' or ''
    table.insert(spent, status.dollars(event.cost) .. estimated)
  end
  local result = type(event.result) == 'string' and event.result or ''
  local streamed = vim.trim(task.since_step .. task.held)
  speaker(task.id)
  if vim.trim(result) ~= '' and not streamed:find(vim.trim(result), 1, true) then
    append({ '' })
    append(text.lines(result)) -- the answer, when it did not stream as it is
  end
  task.held = ''
  local lines = { '  ■ ' .. table.concat(spent, ' · ') }
  append(lines, 'TalosChatEnd')
  if event.error ~= nil and event.error ~= vim.NIL then
    append({ '  ! ' .. text.line(event.error, 500) }, 'TalosChatError')
  end
  tail = { kind = 'end', task_id = task.id }
  local level = (event.state == 'done') and vim.log.levels.INFO or vim.log.levels.WARN
  local where = M.visible() and '' or ' (:TalosChat)'
  message.say('Talos: ' .. short(task.title) .. ': ' .. table.concat(spent, ' · ') .. where,
    level)
end

--- `talos/conversation`: one event of a task.
function M.handler(_, event, ctx)
  if type(event) ~= 'table' or type(event.task_id) ~= 'string' then
    return vim.NIL
  end
  state.conversation[ctx.client_id] = true
  vim.schedule(function()
    local task = task_of(event, ctx.client_id)
    local kind = event.kind
    if kind == 'begin' then
      begin(task, event)
    elseif kind == 'text' then
      add_text(task, event.text)
    elseif kind == 'step' then
      add_step(task, event.message)
    elseif kind == 'proposal' then
      add_proposal(task, event.proposal)
    elseif kind == 'end' then
      finish(task, event)
    end
  end)
  return vim.NIL
end

-- ------------------------------------------------------------------ prompts
--- A prompt of the server (talos/prompt), shown with its actions (under its task: `task_id`,
--- null for a prompt of no task); answered in its menu.
function M.prompt(_, params)
  local task_id = type(params.task_id) == 'string' and text.line(params.task_id, 80) or nil
  speaker(task_id)
  local lines = text.lines(params.message)
  local out = { '  ? ' .. (lines[1] or '') }
  for i = 2, #lines do
    table.insert(out, '    ' .. lines[i])
  end
  local titles = {}
  for _, action in ipairs(type(params.actions) == 'table' and params.actions or {}) do
    table.insert(titles, text.line(action, 100))
  end
  table.insert(out, '    [' .. table.concat(titles, ' / ') .. ']')
  append(out, 'TalosChatPrompt')
  local row = append({ '    … waiting for your answer in the menu' }, 'TalosChatPrompt')
  prompt_marks[params.prompt_id] = mark(row)
  tail = { kind = 'prompt', task_id = task_id }
end

--- The prompt was answered, dismissed or closed: its status line says so.
function M.prompt_done(prompt_id, how)
  local id = prompt_marks[prompt_id]
  local row = id and buf and vim.api.nvim_buf_is_valid(buf) and mark_row(id)
  if row then
    set_line(row, '    → ' .. how, 'TalosChatPrompt')
  end
  prompt_marks[prompt_id] = nil
end

-- ------------------------------------------------------------------ the window
--- Whether the chat is in a window of the current tab page.
function M.visible()
  if not (buf and vim.api.nvim_buf_is_valid(buf)) then
    return false
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
  return false
end

--- :TalosChat: the chat in a window of this tab page (a new split when none), the cursor
--- at its end.
function M.open()
  local b = ensure()
  local win = M.visible()
  if win then
    vim.api.nvim_set_current_win(win)
  else
    vim.cmd(state.config.chat_split or 'botright split')
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, b)
  end
  window_options(win)
  vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(b), 0 })
  return b
end

--- The latest task begun: { task_id, client_id }, or nil.
function M.latest()
  return latest
end

--- The chat's buffer number (nil before anything happened).
function M.buffer()
  return buf and vim.api.nvim_buf_is_valid(buf) and buf or nil
end

-- The proposal on the cursor's line: { proposal_id, client_id }, or nil.
local function proposal_here()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, marks_ns, { row, 0 }, { row, -1 }, {})) do
    if at_mark[m[1]] then
      return at_mark[m[1]]
    end
  end
end

local function on_proposal(verb)
  return function()
    local here = proposal_here()
    if not here then
      return message.say('Talos: no proposal on this line', vim.log.levels.WARN)
    end
    local client = vim.lsp.get_client_by_id(here.client_id)
    require('talos.commands')[verb]({ here.proposal_id }, client)
  end
end

keymaps = function(b)
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { buffer = b, nowait = true, silent = true, desc = desc })
  end
  local follow_up = function() require('talos.commands').follow_up() end
  map('i', follow_up, 'Talos: follow up')
  map('<CR>', function()
    if proposal_here() then
      on_proposal('diff')()
    else
      follow_up()
    end
  end, 'Talos: diff the proposal here, else follow up')
  map('gd', on_proposal('diff'), 'Talos: diff the proposal here')
  map('ga', on_proposal('apply'), 'Talos: apply the proposal here')
  map('gr', on_proposal('reject'), 'Talos: reject the proposal here')
  map('<C-c>', function()
    if latest then
      require('talos.commands').cancel(latest.task_id, vim.lsp.get_client_by_id(latest.client_id))
    end
  end, 'Talos: cancel the latest task')
  map('q', function()
    if #vim.api.nvim_tabpage_list_wins(0) > 1 then
      vim.cmd('close')
    end
  end, 'Talos: close the chat')
end

return M
