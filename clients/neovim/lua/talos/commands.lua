-- The :Talos* commands. Every request is asynchronous (a callback, never request_sync), so
-- the editor is never held up by the server; errors are shown as messages (talos.message).
local client_mod = require('talos.client')
local compat = require('talos.compat')
local message = require('talos.message')
local state = require('talos.state')
local text = require('talos.text')

local M = {}

M.QUICKFIX_TITLE = 'Talos proposals'
local OPEN = { pending = true, partly_applied = true } -- what can still be applied
local INFO, WARN, ERROR = vim.log.levels.INFO, vim.log.levels.WARN, vim.log.levels.ERROR
local READY_MS = 30000 -- how long a command waits for a client still starting

local function notify(said, level)
  message.say('Talos: ' .. said, level or INFO)
end

-- Run `fn` once `client` is initialized (a command given right after setup waits for it).
local function when_ready(client, fn)
  if client.initialized then
    return fn()
  end
  local timer = compat.uv.new_timer()
  local waited = 0
  timer:start(50, 50, vim.schedule_wrap(function()
    waited = waited + 50
    if client.initialized or waited >= READY_MS or compat.is_stopped(client) then
      timer:stop()
      timer:close()
      if client.initialized then
        fn()
      else
        notify('talos-ls did not start', ERROR)
      end
    end
  end))
end

--- workspace/executeCommand with ONE object argument; `done(result)` on success,
--- `failed(err)` (after the error is shown) otherwise. Both run scheduled.
function M.exec(client, command, argument, done, failed)
  local bufnr = vim.api.nvim_get_current_buf()
  when_ready(client, function()
    local params = { command = command, arguments = { argument } }
    compat.request(client, 'workspace/executeCommand', params, function(err, result)
      vim.schedule(function()
        if err then
          notify(text.line(err.message, 300), ERROR)
          if failed then
            failed(err)
          end
        elseif done then
          done(result)
        end
      end)
    end, bufnr)
  end)
end

local function request(client, method, params, done)
  when_ready(client, function()
    compat.request(client, method, params, function(err, result)
      vim.schedule(function()
        if err then
          notify(text.line(err.message, 300), ERROR)
        else
          done(result)
        end
      end)
    end)
  end)
end

local function list(value) -- a JSON array (Lua's empty table may come as vim.NIL or {})
  return type(value) == 'table' and value or {}
end

local function client_or_say()
  local client = client_mod.ensure(0)
  if not client then
    notify('talos-ls is not running and could not be started (see :help talos-setup)', ERROR)
  end
  return client
end

--- The server's list `method`: `empty` is said when it has nothing, else the person picks an
--- item (shown by `format`) and `chosen` gets it, out of the picker's callback.
local function pick_from(client, method, params, empty, picker, chosen)
  M.exec(client, method, params, function(items)
    items = list(items)
    if #items == 0 then
      return notify(empty)
    end
    vim.ui.select(items, picker, function(item)
      if item then
        vim.schedule(function() chosen(item) end)
      end
    end)
  end)
end

-- A scratch buffer in a split: `name`, plain `lines`, read-only.
local function scratch(name, lines, filetype, split)
  if split ~= false then
    vim.cmd(split or 'botright new')
  end
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

-- ------------------------------------------------------------------ tasks
function M.task(prompt, line1, line2)
  if not prompt or not prompt:match('%S') then
    vim.ui.input({ prompt = 'Talos task: ' }, function(input)
      if input and input:match('%S') then
        vim.schedule(function() M.task(input, line1, line2) end)
      end
    end)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_or_say()
  if not client then
    return
  end
  local argument = { prompt = prompt }
  local uri = client_mod.uri_in(client, bufnr)
  argument.uri = uri
  if uri and line1 then
    argument.range = { start = { line = line1 - 1, character = 0 },
                       ['end'] = { line = line2 - 1, character = 0 } }
    local diagnostics = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.source ~= 'talos' and d.lnum >= line1 - 1 and d.lnum <= line2 - 1 then
        table.insert(diagnostics, { message = d.message, source = d.source })
      end
    end
    if #diagnostics > 0 then
      argument.diagnostics = diagnostics
    end
  end
  M.exec(client, 'talos.task.start', argument, function(started)
    state.last_task[client.id] = started.task_id
    notify('task ' .. text.line(started.task_id, 40) .. ' ' .. text.line(started.state, 20)
      .. ' (:TalosChat to follow it)')
  end)
end

--- :TalosFollowUp: `prompt` to the latest task of the chat (its model sees the earlier
--- conversation), or a new task when there is none yet.
function M.follow_up(prompt)
  if not prompt or not prompt:match('%S') then
    vim.ui.input({ prompt = 'Talos follow-up: ' }, function(input)
      if input and input:match('%S') then
        vim.schedule(function() M.follow_up(input) end)
      end
    end)
    return
  end
  local chat = require('talos.chat')
  local latest = chat.latest()
  local client = latest and vim.lsp.get_client_by_id(latest.client_id)
  if not client then
    return M.task(prompt)
  end
  M.exec(client, 'talos.task.followUp', { task_id = latest.task_id, prompt = prompt },
    function(started)
      state.last_task[client.id] = started.task_id
      notify('follow-up ' .. text.line(started.task_id, 40) .. ' '
        .. text.line(started.state, 20))
    end)
end

function M.cancel(task_id, client)
  client = client or client_or_say()
  if not client then
    return
  end
  local function cancel(id)
    M.exec(client, 'talos.task.cancel', { task_id = id }, function(result)
      local outcome = result.cancelled and ' cancelled' or ' was not running'
      notify('task ' .. text.line(id, 40) .. outcome)
    end)
  end
  if task_id and task_id ~= '' then
    return cancel(task_id)
  end
  M.exec(client, 'talos.task.list', vim.empty_dict(), function(tasks)
    local running = {}
    for _, t in ipairs(list(tasks)) do
      if t.state == 'running' or t.state == 'queued' then
        table.insert(running, t)
      end
    end
    if #running == 0 then
      notify('no task is running')
    elseif #running == 1 then
      cancel(running[1].id)
    else
      vim.ui.select(running, {
        prompt = 'Cancel which Talos task?',
        format_item = function(t) return text.line(t.id, 20) .. ' ' .. text.line(t.title, 60) end,
      }, function(t)
        if t then
          cancel(t.id)
        end
      end)
    end
  end)
end

-- The client and the task a command is about: `task_id`, else this session's latest task
-- (nil, said, when there is none: `usage` shows how to name one).
local function task_of(task_id, usage)
  local client = client_or_say()
  if not client then
    return nil
  end
  task_id = (task_id and task_id ~= '') and task_id or state.last_task[client.id]
  if not task_id then
    notify('no task yet: ' .. usage, WARN)
    return nil
  end
  return client, task_id
end

function M.show(task_id)
  local client
  client, task_id = task_of(task_id, ':TalosShow {task}')
  if not client then
    return
  end
  M.exec(client, 'talos.task.show', { task_id = task_id }, function(markdown)
    scratch('talos://task/' .. text.line(task_id, 40), text.lines(markdown), 'markdown')
  end)
end

-- Every file a finished task changed, back as it was before it (talos.task.rewind): the
-- latest task of this session unless one is named. A file the person changed since is left,
-- and named with why.
function M.undo_task(task_id)
  local client
  client, task_id = task_of(task_id, ':TalosUndoTask {task}')
  if not client then
    return
  end
  M.exec(client, 'talos.task.rewind', { task_id = task_id }, function(result)
    local left = list(result.left)
    local said = text.line(result.message, 2000)
    notify(said, #left > 0 and WARN or INFO)
    M.refresh_quickfix()
  end)
end

function M.tasks()
  local client = client_or_say()
  if not client then
    return
  end
  pick_from(client, 'talos.task.list', vim.empty_dict(), 'no running or recent task', {
    prompt = 'Talos tasks',
    kind = 'talos_task',
    format_item = function(t)
      return table.concat({ text.line(t.id, 20), text.line(t.state, 12),
                            '$' .. text.line(t.cost, 12), text.line(t.title, 60),
                            text.line(t.step, 40) }, '  ')
    end,
  }, function(t) M.show(t.id) end)
end

-- -------------------------------------------------------------- proposals
local function first_line(lines)
  for _, line in ipairs(list(lines)) do
    if type(line) == 'string' and line:match('%S') then
      return vim.trim(line)
    end
  end
  return ''
end

--- The quickfix items (and what each is) of proposals as `talos.proposal.show` gives them.
function M.quickfix_items(root, shown)
  local items, entries = {}, {}
  table.sort(shown, function(a, b)
    return tostring(a.path) .. tostring(a.id) < tostring(b.path) .. tostring(b.id)
  end)
  for _, p in ipairs(shown) do
    local hunks = list(p.hunks)
    local path = text.line(p.path, 400)
    for _, h in ipairs(hunks) do
      local start = tonumber(h.start_line) or 0
      local summary = string.format('%s change %d of %d: -%d +%d', text.line(p.id, 40),
        (tonumber(h.index) or 0) + 1, #hunks, #list(h.old), #list(h.new))
      local added = first_line(h.new)
      if added ~= '' then
        summary = summary .. ': ' .. added
      end
      table.insert(items, {
        filename = root .. '/' .. path,
        lnum = start + 1,
        end_lnum = math.max(tonumber(h.end_line) or start, start + 1),
        col = 1,
        text = text.line(summary, 200),
        type = 'I',
      })
      table.insert(entries, { proposal_id = p.id, hunk = h.index })
    end
  end
  return items, entries
end

local function set_quickfix(client, shown, open)
  local items, entries = M.quickfix_items(client.config.root_dir, shown)
  local current = vim.fn.getqflist({ title = 0, id = 0 })
  local what = { title = M.QUICKFIX_TITLE, items = items,
                 context = { talos = { client_id = client.id, entries = entries } } }
  if current.title == M.QUICKFIX_TITLE then
    what.id = current.id
    vim.fn.setqflist({}, 'r', what)
  else
    vim.fn.setqflist({}, ' ', what)
  end
  if open then
    if #items == 0 then
      notify('no proposal to review')
    elseif state.config.open_quickfix then
      vim.cmd('botright copen')
    end
  end
end

--- :TalosProposals: every hunk still to review in the quickfix list.
function M.proposals(open, client)
  client = client or client_or_say()
  if not client then
    return
  end
  M.exec(client, 'talos.proposal.list', vim.empty_dict(), function(proposals)
    local pending = {}
    for _, p in ipairs(list(proposals)) do
      if OPEN[p.status] then
        table.insert(pending, p)
      end
    end
    if #pending == 0 then
      return set_quickfix(client, {}, open)
    end
    local shown, remaining = {}, #pending
    local function one_done()
      remaining = remaining - 1
      if remaining == 0 then
        set_quickfix(client, shown, open)
      end
    end
    for _, p in ipairs(pending) do
      M.exec(client, 'talos.proposal.show', { proposal_id = p.id }, function(full)
        table.insert(shown, full)
        one_done()
      end, one_done)
    end
  end)
end

--- The quickfix list follows the proposals while it is Talos's.
function M.refresh_quickfix()
  local current = vim.fn.getqflist({ title = 0, context = 0 })
  local ctx = type(current.context) == 'table' and current.context.talos
  if current.title ~= M.QUICKFIX_TITLE or type(ctx) ~= 'table' then
    return
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    M.proposals(false, client)
  end
end

-- The quickfix entry under the cursor, in Talos's list: {client, proposal_id, hunk}.
local function quickfix_target()
  if vim.bo.buftype ~= 'quickfix' then
    return nil
  end
  local current = vim.fn.getqflist({ title = 0, context = 0 })
  local ctx = type(current.context) == 'table' and current.context.talos
  if current.title ~= M.QUICKFIX_TITLE or type(ctx) ~= 'table' then
    return nil
  end
  local entry = list(ctx.entries)[vim.fn.line('.')]
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if entry and client then
    return { client = client, proposal_id = entry.proposal_id, hunk = entry.hunk }
  end
end

-- Talos's diagnostic on the cursor's line: {proposal_id, hunk}.
local function cursor_target(bufnr)
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local lsp = d.user_data and d.user_data.lsp or {}
    local data = type(lsp.data) == 'table' and lsp.data or {}
    local last = math.max((d.end_lnum or d.lnum) - 1, d.lnum)
    if d.source == 'talos' and d.lnum <= line and line <= last and data.proposal_id then
      return { proposal_id = data.proposal_id, hunk = data.hunk }
    end
  end
end

--- Which proposal (and hunk) a command is about: `{proposal_id}` and/or `{hunk}` (1-based, as
--- "change N of M") given; else the quickfix entry, else the hunk under the cursor, else the
--- file's only proposal, else one picked. `then_(client, proposal_id, hunk)`, hunk 0-based
--- or nil (the whole proposal).
local function target(fargs, verb, then_, with_stale, client)
  local given_id, given_hunk
  for _, arg in ipairs(fargs or {}) do
    if arg:match('^%d+$') then
      given_hunk = tonumber(arg) - 1
    else
      given_id = arg
    end
  end
  local from_qf = quickfix_target()
  if from_qf then
    local hunk = given_hunk
    if hunk == nil and given_id == nil then
      hunk = from_qf.hunk
    end
    return then_(from_qf.client, given_id or from_qf.proposal_id, hunk)
  end
  local bufnr = vim.api.nvim_get_current_buf()
  client = client or client_or_say()
  if not client then
    return
  end
  if given_id then
    return then_(client, given_id, given_hunk)
  end
  local here = cursor_target(bufnr)
  if here then
    return then_(client, here.proposal_id, given_hunk)
  end
  local uri = client_mod.uri_in(client, bufnr)
  local function choose(proposals, fallback)
    local open = {}
    for _, p in ipairs(list(proposals)) do
      if OPEN[p.status] or (with_stale and p.status == 'stale') then
        table.insert(open, p)
      end
    end
    if #open == 1 then
      return then_(client, open[1].id, given_hunk)
    elseif #open == 0 then
      if fallback then
        return fallback()
      end
      return notify('no proposal to ' .. verb, WARN)
    end
    vim.ui.select(open, {
      prompt = 'Talos: ' .. verb .. ' which proposal?',
      format_item = function(p)
        return string.format('%s %s (%s)', text.line(p.id, 20), text.line(p.path, 80),
          text.line(p.status, 20))
      end,
    }, function(p)
      if p then
        then_(client, p.id, given_hunk)
      end
    end)
  end
  local function everywhere()
    M.exec(client, 'talos.proposal.list', vim.empty_dict(), function(all) choose(all) end)
  end
  if uri then
    M.exec(client, 'talos.proposal.list', { uri = uri },
      function(mine) choose(mine, everywhere) end)
  else
    everywhere()
  end
end

-- apply, reject and diff take the client of a proposal named in `fargs` (from the chat).
function M.apply(fargs, of)
  target(fargs, 'apply', function(client, proposal_id, hunk)
    local argument = { proposal_id = proposal_id }
    if hunk then
      argument.hunks = { hunk }
    end
    M.exec(client, 'talos.proposal.apply', argument, function(result)
      local what = text.line(proposal_id, 40) .. (hunk and (' change ' .. (hunk + 1)) or '')
      if result.applied then
        notify(what .. ' applied (' .. text.line(result.status, 20) .. ')')
      else
        notify(what .. ' not applied: ' .. text.line(result.status, 40), WARN)
      end
      M.refresh_quickfix()
    end)
  end, false, of)
end

function M.reject(fargs, of)
  target(fargs, 'reject', function(client, proposal_id)
    M.exec(client, 'talos.proposal.reject', { proposal_id = proposal_id }, function(result)
      notify(text.line(proposal_id, 40) .. ' ' .. text.line(result.status, 20))
      M.refresh_quickfix()
    end)
  end, true, of)
end

function M.undo(fargs)
  local client = client_or_say()
  if not client then
    return
  end
  local argument = { uri = client_mod.uri_in(client, vim.api.nvim_get_current_buf()) }
  if fargs and fargs[1] then
    argument.proposal_id = fargs[1]
  end
  if argument.uri == nil and argument.proposal_id == nil then
    argument = vim.empty_dict()
  end
  M.exec(client, 'talos.undo', argument, function(result)
    notify(text.line(result.proposal_id, 40) .. ' undone in ' .. text.line(result.path, 200))
    M.refresh_quickfix()
  end)
end

-- Lines of a file's text, exactly (a last line ending adds no empty line).
local function file_lines(value)
  if type(value) ~= 'string' then
    return {}
  end
  local lines = vim.split(value:gsub('\r\n', '\n'), '\n', { plain = true })
  if lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- :TalosDiff: a tab with the base (left) and the proposed text (right) in diff mode.
function M.diff(fargs, of)
  target(fargs, 'show', function(client, proposal_id)
    M.exec(client, 'talos.proposal.show', { proposal_id = proposal_id }, function(summary)
      local got = {}
      local function open()
        if not (got.base and got.proposed) then
          return
        end
        local path = text.line(summary.path, 400)
        vim.cmd('tabnew')
        local left = scratch(M.diff_name(path, proposal_id, 'base'), file_lines(got.base), nil,
          false)
        M.detect_filetype(left, path)
        vim.cmd('diffthis')
        vim.cmd('rightbelow vertical new')
        local right = scratch(M.diff_name(path, proposal_id, 'proposed'),
          file_lines(got.proposed), nil, false)
        M.detect_filetype(right, path)
        vim.cmd('diffthis')
      end
      for _, side in ipairs({ 'base', 'proposed' }) do
        request(client, 'talos/proposalContent', { proposal_id = proposal_id, side = side },
          function(content)
            got[side] = content
            open()
          end)
      end
    end)
  end, true, of)
end

--- A diff buffer's name, readable in a tab label: Neovim shortens every directory of a name
--- there ('talos://p1/base/src/app.py' showed as 't///p/b/s/app.py'), so this name has no
--- slash: 'app.py [talos p1 base]'.
function M.diff_name(path, proposal_id, side)
  local tail = vim.fn.fnamemodify(path, ':t')
  local id = text.line(proposal_id, 40):gsub('/', '_')
  return string.format('%s [talos %s %s]', (tail ~= '' and tail or path):gsub('/', '_'), id, side)
end

--- The filetype Neovim's detection gives `path`, set on the scratch buffer `buf`.
function M.detect_filetype(buf, path)
  vim.api.nvim_buf_call(buf, function()
    pcall(vim.cmd, 'doautocmd <nomodeline> filetypedetect BufRead ' .. vim.fn.fnameescape(path))
  end)
end

-- -------------------------------------------------------------- questions
function M.questions()
  local client = client_or_say()
  if not client then
    return
  end
  pick_from(client, 'talos.questions.list', vim.empty_dict(), 'no open question', {
    prompt = 'Talos questions',
    kind = 'talos_question',
    format_item = function(q)
      return text.line(q.question, 150) .. ' [' .. text.line(q.status, 20) .. ']'
    end,
  }, function(q)
    vim.ui.select(list(q.options), {
      prompt = 'Talos: ' .. text.line(q.question, 150),
      kind = 'talos_question',
      format_item = function(option) return text.line(option, 150) end,
    }, function(option)
      if not option then
        return
      end
      local answer = { candidate_id = q.candidate_id, answer = option }
      M.exec(client, 'talos.question.answer', answer, function(result)
        if result.applied then
          notify('answer recorded')
        else
          notify('answer not taken: ' .. text.line(result.reason, 40), WARN)
        end
      end)
    end)
  end)
end

--- :TalosMessages: every message of this session, whole (the command line shows one line).
function M.messages()
  scratch('Talos messages', message.show(), nil)
  vim.cmd('normal! G')
end

-- ----------------------------------------------------------------- memory
M.memory_keys = {} -- from the last :TalosMemory, for :TalosForget's completion

function M.memory()
  local client = client_or_say()
  if not client then
    return
  end
  local uri = client_mod.uri_in(client, vim.api.nvim_get_current_buf())
  M.exec(client, 'talos.memory.list', uri and { uri = uri } or vim.empty_dict(), function(facts)
    facts = list(facts)
    local lines = { 'Talos memory of ' .. text.line(client.config.root_dir, 200) ..
                    ' (:TalosForget {key} to retract one)', '' }
    M.memory_keys = {}
    for _, f in ipairs(facts) do
      table.insert(M.memory_keys, f.key)
      table.insert(lines, string.format('%.2f  %s  %s  (%s)', tonumber(f.confidence) or 0,
        text.line(f.key, 40), text.line(f.statement, 300), text.line(f.source, 40)))
    end
    if #facts == 0 then
      table.insert(lines, 'Nothing remembered yet.')
    end
    scratch('talos://memory', lines, 'talosmemory')
  end)
end

function M.forget(key)
  local client = client_or_say()
  if not client then
    return
  end
  local uri = client_mod.uri_in(client, vim.api.nvim_get_current_buf())
  local function forget(k)
    M.exec(client, 'talos.memory.forget', { key = k, uri = uri }, function(result)
      notify(text.line(k, 40) .. (result.retracted and ' forgotten' or ' was not held'))
    end)
  end
  if key and key ~= '' then
    return forget(key)
  end
  pick_from(client, 'talos.memory.list', uri and { uri = uri } or vim.empty_dict(),
            'nothing remembered', {
    prompt = 'Talos: forget which fact?',
    format_item = function(f) return text.line(f.statement, 150) end,
  }, function(f) forget(f.key) end)
end

return M
