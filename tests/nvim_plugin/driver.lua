-- Headless Neovim playing the person with the Talos plugin itself (clients/neovim): its
-- setup, its :Talos* commands, its statusline; vim.ui.select is replaced by a scripted picker
-- that answers later (as telescope or dressing do), and vim.notify is recorded. Driven by
-- tests/nvim_plugin/test_plugin.py; parameters in the JSON file named by $TALOS_E2E_CONFIG:
--   {scenario, plugin, cmd, settings, results, ws, other}.
-- Each step writes one JSON line to `results`; whatever happens, the clients are stopped and
-- Neovim quits. The driver may check the server with request_sync; it drives only through
-- the plugin.

local cfg = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv('TALOS_E2E_CONFIG')), '\n'))
vim.opt.runtimepath:prepend(cfg.plugin)
local out = assert(io.open(cfg.results, 'a'))
local uv = vim.loop
local WAIT_MS = 30000

local function record(step, values)
  values = values or {}
  values.step = step
  out:write(vim.fn.json_encode(values), '\n')
  out:flush()
end

local function wait_for(what, check, ms)
  local value
  local ok = vim.wait(ms or WAIT_MS, function()
    value = check()
    return value
  end, 10)
  if not ok then
    error('timed out waiting for ' .. what, 0)
  end
  return value
end

-- vim.notify, recorded.
local notes = {}
vim.notify = function(message, level)
  table.insert(notes, { message = message, level = level or vim.NIL })
end

local function noted(pattern)
  for _, n in ipairs(notes) do
    if type(n.message) == 'string' and n.message:find(pattern) then
      return n.message
    end
  end
end

-- vim.ui.select, scripted: each call takes the next pick (a function of the shown items that
-- returns an index, or nil to dismiss), and answers 100 ms later.
local selects, picks = {}, {}
vim.ui.select = function(items, opts, on_choice)
  local format = opts.format_item or tostring
  local shown = {}
  for i, item in ipairs(items) do
    shown[i] = format(item)
  end
  local entry = { prompt = opts.prompt or vim.NIL, kind = opts.kind or vim.NIL, items = shown,
                  statusline = require('talos').statusline() }
  table.insert(selects, entry)
  local pick = table.remove(picks, 1)
  local delay = type(pick) == 'table' and pick.delay or 100
  pick = type(pick) == 'table' and pick.pick or pick
  vim.defer_fn(function()
    local index = pick and pick(shown) or nil
    entry.chosen = index and shown[index] or vim.NIL
    on_choice(index and items[index] or nil, index)
  end, delay)
end

local function containing(text)
  return function(shown)
    for i, s in ipairs(shown) do
      if s:find(text, 1, true) then
        return i
      end
    end
  end
end

local function talos_clients()
  local found = {}
  for _, c in pairs(vim.lsp.get_active_clients()) do
    if c.name == 'talos' then
      table.insert(found, c)
    end
  end
  table.sort(found, function(a, b) return a.id < b.id end)
  return found
end

local function attached(bufnr)
  local ids = {}
  for _, c in ipairs(talos_clients()) do
    if vim.lsp.buf_is_attached(bufnr, c.id) then
      table.insert(ids, c.id)
    end
  end
  return ids
end

local function lines(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

-- A check of the server's state (never a way to drive it).
local function server(client, command, argument)
  local response = client.request_sync('workspace/executeCommand',
    { command = command, arguments = { argument or vim.empty_dict() } }, 15000, 0)
  if not response or response.err then
    error(command .. ' failed: ' .. vim.inspect(response), 0)
  end
  return response.result
end

local function edit(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  return vim.api.nvim_get_current_buf()
end

-- Setup, then the buffer of src/app.py attached to an initialized client of the workspace.
local function start(settings)
  require('talos').setup({ cmd = cfg.cmd, settings = settings or cfg.settings,
                           progress_interval_ms = 0 })
  local app = vim.api.nvim_get_current_buf()
  local client = wait_for('a client attached and initialized', function()
    local c = talos_clients()[1]
    return c and c.initialized and vim.lsp.buf_is_attached(app, c.id) and c
  end)
  wait_for('the first status', function() return require('talos').status() end)
  return app, client
end

-- Wait for the end of the task whose start was noted (the progress end notification).
local function task_ended(client)
  local task_id = wait_for('the task started', function()
    return require('talos.state').last_task[client.id]
  end)
  wait_for('the end of ' .. task_id, function()
    for _, t in ipairs(server(client, 'talos.task.list')) do
      if t.id == task_id and t.state ~= 'running' and t.state ~= 'queued' then
        return true
      end
    end
  end)
  return task_id
end

local function diagnostics(bufnr)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == 'talos' then
      table.insert(found, d)
    end
  end
  return found
end

local function rendered(statusline)
  return vim.api.nvim_eval_statusline(statusline, { maxwidth = 1000 }).str
end

local function quickfix()
  local info = vim.fn.getqflist({ title = 0, items = 0 })
  local items = {}
  for _, item in ipairs(info.items) do
    table.insert(items, { file = vim.fn.bufname(item.bufnr), lnum = item.lnum,
                          end_lnum = item.end_lnum, text = item.text })
  end
  return info.title, items
end

local function quickfix_open()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.bo[vim.api.nvim_win_get_buf(win)].buftype == 'quickfix' then
      return true
    end
  end
  return false
end

-- ------------------------------------------------------------------ scenarios
local SCENARIOS = {}

-- Everything the acceptance lists, in one session.
function SCENARIOS.review()
  local app, client = start()
  -- One client per root: another file of the workspace shares it; a file of another root
  -- (its own pyproject.toml) gets its own.
  local other = edit(cfg.ws .. '/src/other.py')
  local lib = edit(cfg.other .. '/lib.py')
  wait_for('the second root attached', function() return #attached(lib) == 1 end)
  vim.cmd('buffer ' .. app)
  local roots = {}
  for _, c in ipairs(talos_clients()) do
    table.insert(roots, { id = c.id, root = c.config.root_dir })
  end
  record('setup', { roots = roots, app = attached(app), other = attached(other),
                    lib = attached(lib), vim_lsp_start = vim.lsp.start ~= nil })

  -- The task streams slowly; a question comes meanwhile and is answered through the picker.
  -- A timer proves the UI loop kept running all along.
  table.insert(picks, containing('pytest'))
  local ticks, last_tick, longest_gap = 0, uv.hrtime(), 0
  local running_statusline = vim.NIL
  local timer = uv.new_timer()
  timer:start(10, 10, vim.schedule_wrap(function()
    local line = require('talos').statusline()
    if line:find('▶') then
      running_statusline = line
    end
    local now = uv.hrtime()
    longest_gap = math.max(longest_gap, (now - last_tick) / 1e6)
    last_tick = now
    ticks = ticks + 1
  end))
  local before = uv.hrtime()
  vim.cmd('TalosTask write the tests')
  local command_ms = (uv.hrtime() - before) / 1e6
  local task_id = task_ended(client)
  local took_ms = (uv.hrtime() - before) / 1e6
  timer:stop()
  timer:close()
  wait_for('the question answered', function() return selects[1] and selects[1].chosen end)
  local facts = wait_for('the answer in the facts', function()
    local found = {}
    for _, f in ipairs(server(client, 'talos.memory.list')) do
      found[f.statement] = f.confidence
    end
    return (found['Tests use pytest'] or 0.5) ~= 0.5 and found
  end)
  record('task', { task_id = task_id, command_ms = command_ms, took_ms = took_ms, ticks = ticks,
                   longest_gap_ms = longest_gap, select = selects[1], facts = facts,
                   running_statusline = running_statusline,
                   questions = server(client, 'talos.questions.list'),
                   began = noted('Talos: write the tests') or vim.NIL,
                   ended = noted(': done') or vim.NIL })

  -- The proposal in the quickfix list.
  wait_for('the diagnostics', function() return #diagnostics(app) == 2 end)
  vim.cmd('TalosProposals')
  local title, items = unpack(wait_for('the quickfix list', function()
    local t, found = quickfix()
    return t == 'Talos proposals' and #found == 2 and { t, found }
  end))
  record('quickfix', { title = title, items = items, open = quickfix_open() })
  vim.cmd('cclose')

  -- :TalosDiff on the first hunk's line: base and proposed side by side in diff mode.
  vim.cmd('buffer ' .. app)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  local tabs = #vim.api.nvim_list_tabpages()
  vim.cmd('TalosDiff')
  local windows = wait_for('the diff tab', function()
    local wins = vim.api.nvim_tabpage_list_wins(0)
    return #vim.api.nvim_list_tabpages() == tabs + 1 and #wins == 2 and wins
  end)
  local shown = {}
  for _, win in ipairs(windows) do
    local buf = vim.api.nvim_win_get_buf(win)
    table.insert(shown, { name = vim.api.nvim_buf_get_name(buf), diff = vim.wo[win].diff,
                          shown = vim.fn.bufname(buf),
                          lines = lines(buf), filetype = vim.bo[buf].filetype,
                          modifiable = vim.bo[buf].modifiable })
  end
  record('diff', { windows = shown })
  vim.cmd('tabclose')

  -- :TalosApply 1 on the hunk's line: that change only; :TalosApply then: the rest of the
  -- proposal; :TalosUndo puts the file back as it was before the first of them.
  vim.cmd('buffer ' .. app)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  local base = lines(app)
  vim.cmd('TalosApply 1')
  local one = wait_for('the buffer changed by one hunk', function()
    local now = lines(app)
    return not vim.deep_equal(now, base) and now
  end)
  wait_for('one hunk left in the quickfix list', function()
    local t, found = quickfix()
    return t == 'Talos proposals' and #found == 1
  end)
  record('apply_hunk', { lines = one })
  vim.cmd('TalosApply')
  local applied = wait_for('the buffer changed by the rest', function()
    local now = lines(app)
    return not vim.deep_equal(now, one) and now
  end)
  wait_for('the quickfix list emptied', function()
    local t, found = quickfix()
    return t == 'Talos proposals' and #found == 0
  end)
  record('apply', { lines = applied, note = noted('applied') or vim.NIL })
  vim.cmd('TalosUndo')
  local undone = wait_for('the buffer restored', function()
    return vim.deep_equal(lines(app), base) and lines(app)
  end)
  record('undo', { lines = undone, note = noted('undone') or vim.NIL })
  -- :TalosUndoTask on the same task: its one change is undone already, and it says so.
  vim.cmd('TalosUndoTask')
  record('undo_task', { note = wait_for('the rewind answered', function()
    return noted('nothing to rewind')
  end) })

  -- The other commands, once each.
  local statusline = require('talos').statusline()
  record('statusline', { text = statusline,
                         rendered = rendered(statusline) })
  vim.cmd('TalosShow')
  local transcript = wait_for('the transcript', function()
    return vim.bo.filetype == 'markdown' and vim.api.nvim_buf_get_name(0):find('talos://task/')
      and lines(0)
  end)
  record('show', { first = transcript[1], buftype = vim.bo.buftype,
                   modifiable = vim.bo.modifiable })
  vim.cmd('close')
  table.insert(picks, containing(task_id))
  vim.cmd('TalosTasks')
  wait_for('the task picked', function() return selects[2] and selects[2].chosen end)
  wait_for('its transcript', function() return vim.api.nvim_buf_get_name(0):find(task_id) end)
  record('tasks', { select = selects[2] })
  vim.cmd('close')
  vim.cmd('TalosMemory')
  local memory = wait_for('the memory', function()
    return vim.api.nvim_buf_get_name(0):find('talos://memory') and lines(0)
  end)
  record('memory', { lines = memory })
  vim.cmd('close')
  local key
  for _, f in ipairs(server(client, 'talos.memory.list')) do
    if f.statement == 'Tests use unittest' then
      key = f.key
    end
  end
  vim.cmd('TalosForget ' .. key)
  wait_for('forgotten', function() return noted('forgotten') end)
  local left = {}
  for _, f in ipairs(server(client, 'talos.memory.list')) do
    table.insert(left, f.statement)
  end
  record('forget', { key = key, left = left })
  vim.cmd('TalosQuestions')
  record('questions', { note = wait_for('the answer', function() return noted('no open question') end) })
  vim.cmd('TalosCancel')
  record('cancel', { note = wait_for('the answer', function() return noted('no task is running') end) })
end

-- :'<,'>TalosTask on the lines of b(), where another tool has a diagnostic.
function SCENARIOS.selection()
  local app, client = start()
  local ns = vim.api.nvim_create_namespace('ruff-test')
  vim.diagnostic.set(ns, app, { { lnum = 4, col = 0, message = 'b is never called',
                                  source = 'ruff', severity = vim.diagnostic.severity.WARN } })
  local before = uv.hrtime()
  vim.cmd('5,6TalosTask what does b return?')
  local command_ms = (uv.hrtime() - before) / 1e6
  local task_id = task_ended(client)
  local took_ms = (uv.hrtime() - before) / 1e6
  record('selection', { task_id = task_id, command_ms = command_ms, took_ms = took_ms })
end

-- A permission prompt, answered through the picker.
function SCENARIOS.permission()
  local app, client = start()
  table.insert(picks, containing('Allow once'))
  vim.cmd('TalosTask make it')
  local task_id = task_ended(client)
  record('permission', { task_id = task_id, select = selects[1] or vim.NIL, app = app })
end

-- A permission prompt answered after the server's timeout: the late choice is not sent.
function SCENARIOS.late()
  local settings = vim.deepcopy(cfg.settings)
  settings.promptTimeout = 1
  local _, client = start(settings)
  table.insert(picks, { pick = containing('Allow once'), delay = 2500 })
  vim.cmd('TalosTask make it')
  local task_id = task_ended(client)
  local pending_after_close = vim.tbl_count(require('talos.prompts').pending())
  wait_for('the late choice', function() return selects[1] and selects[1].chosen end)
  local late = wait_for('the late choice noted', function() return noted('already ended') end)
  vim.wait(300, function() return false end, 10) -- an answer sent now would come back refused
  record('late', { task_id = task_id, late = late, pending_after_close = pending_after_close,
                   refused = noted('prompt_id') or vim.NIL })
end

-- Hostile text: in the statusline and in the quickfix list it stays plain, on one line.
function SCENARIOS.hostile()
  local app, client = start()
  local status = require('talos.status')
  local evil = '50% %{execute("qa!")}%#Error#\27[31mred\27[0m\nsecond line\r\226\128\174rtl'
  local base = vim.deepcopy(require('talos').status())
  base.running = { { id = 't1', title = evil, state = 'running', step = evil, cost = '0' } }
  base.open_questions = 1
  status.update(client.id, base)
  local titled = require('talos').statusline({ title = true, title_width = 200 })
  base.settings.priced = false
  base.tokens_in, base.tokens_out = 41200, 2300
  status.update(client.id, base)
  local unpriced = require('talos').statusline()
  base.folders = { { root = '/w', mcp = {
    { name = 'git', state = 'ready', error = '' },
    { name = 'web', state = 'failed', error = 'did not start' },
  } } }
  status.update(client.id, base)
  local mcp_failed = require('talos').statusline()
  record('statusline', {
    titled = titled, titled_rendered = rendered(titled),
    unpriced = unpriced, unpriced_rendered = rendered(unpriced),
    mcp_failed = mcp_failed,
  })
  -- A real proposal whose new line carries escapes, a '%' and a bidi override.
  require('talos').task('fix 100% of %f \27[2J')
  task_ended(client)
  wait_for('the diagnostics', function() return #diagnostics(app) >= 1 end)
  vim.cmd('TalosProposals')
  local title, items = unpack(wait_for('the quickfix list', function()
    local t, found = quickfix()
    return t == 'Talos proposals' and #found >= 1 and { t, found }
  end))
  record('quickfix', { title = title, items = items })
end

local function find_line(bufnr, needle, from)
  for i, line in ipairs(lines(bufnr)) do
    if i >= (from or 1) and line:find(needle, 1, true) then
      return i, line
    end
  end
end

-- The chat buffer: a task streamed into it as it runs, its question and proposal shown, `ga`
-- on the proposal's line, a follow-up; then raw hostile events (as a server that escapes
-- nothing would send them) stay plain text, and a modeline among them does nothing.
function SCENARIOS.chat()
  local app, client = start()
  local chat = require('talos.chat')
  vim.cmd('TalosChat')
  local buf = chat.buffer()
  local win = vim.api.nvim_get_current_win()
  local opened = { name = vim.fn.bufname(buf), buftype = vim.bo[buf].buftype,
                   filetype = vim.bo[buf].filetype, modeline = vim.bo[buf].modeline,
                   modifiable = vim.bo[buf].modifiable, foldmethod = vim.wo[win].foldmethod,
                   wins = #vim.api.nvim_tabpage_list_wins(0), first = lines(buf)[1] }
  table.insert(picks, containing('pytest'))
  vim.cmd('TalosTask write the tests')
  -- The first chunk of the answer, while the task still runs.
  local at_first = wait_for('the first chunk in the chat', function()
    return find_line(buf, 'chunk01') and lines(buf)
  end)
  local task_id = require('talos.state').last_task[client.id]
  local state_at_first
  for _, t in ipairs(server(client, 'talos.task.list')) do
    if t.id == task_id then
      state_at_first = t.state
    end
  end
  task_ended(client)
  wait_for('the end in the chat', function() return find_line(buf, '■ ') end)
  local streamed = lines(buf)
  local cursor = vim.api.nvim_win_get_cursor(win)[1]
  -- `ga` on the proposal's line applies it; the line says so.
  local row = wait_for('the proposal line', function() return find_line(buf, '◆ proposal') end)
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { row, 0 })
  local before = lines(app)
  vim.api.nvim_feedkeys('ga', 'x', false)
  wait_for('the buffer changed', function() return not vim.deep_equal(lines(app), before) end)
  local applied = wait_for('the proposal line updated', function()
    local i, line = find_line(buf, '◆ proposal')
    return line:find('· applied') and { i, line }
  end)
  record('chat', { opened = opened, at_first = at_first, state_at_first = state_at_first,
                   streamed = streamed, cursor = cursor, count = #streamed,
                   applied = applied[2], app = lines(app), task_id = task_id,
                   end_note = noted(': done ·') or vim.NIL,
                   select = selects[1] or vim.NIL })
  -- A follow-up: a new task after the first, its answer in the chat.
  local ends = #streamed
  vim.cmd('TalosFollowUp and now the docs')
  wait_for('the follow-up answered', function() return find_line(buf, 'followed up', ends) end)
  wait_for('its end', function() return find_line(buf, '■ ', ends + 1) end)
  record('followup', { lines = lines(buf), latest = chat.latest() })

  -- Raw hostile events, straight to the handler.
  local ctx = { client_id = client.id }
  local function event(e)
    e.task_id = 'tevil'
    chat.handler(nil, e, ctx)
  end
  event({ kind = 'begin', title = '\27[2Jclear\nsecond %{execute("qa!")}', follows = vim.NIL })
  for _, piece in ipairs({ 'red: \27[31mred\27[0m, csi: \194', '\155', '2J, rtl: \226\128',
                           '\174lfr, crlf: a\r', '\nb\n', 'vim: set ft=sh ts=2 :\n',
                           '# {{{ a fold marker\n',
                           '<script>alert(1)</script> [a](http://x)\n' }) do
    event({ kind = 'text', text = piece })
  end
  event({ kind = 'step', message = 'step 1: \27]0;title\7 run' })
  chat.handler(nil, { task_id = 'tside', kind = 'step', message = 'step 1: meanwhile' }, ctx)
  event({ kind = 'text', text = 'more' })
  -- The last line is a modeline (a modeline is looked for in the last lines only).
  event({ kind = 'end', state = 'done', result = '', tokens = 5, cost = 0,
          error = '\27[31mboom\nline vim: set ft=sh ts=2 :' })
  wait_for('the hostile end', function() return find_line(buf, 'boom') end)
  vim.api.nvim_buf_call(buf, function() vim.cmd('doautocmd BufRead') end) -- modelines run here
  record('hostile', { lines = lines(buf), filetype = vim.bo[buf].filetype,
                      tabstop = vim.bo[buf].tabstop, modeline = vim.bo[buf].modeline })

  -- A task cancelled while its answer streamed: its cost counted from the text, said so.
  chat.handler(nil, { task_id = 'tcut', kind = 'begin', title = 'cut short', follows = vim.NIL }, ctx)
  chat.handler(nil, { task_id = 'tcut', kind = 'end', state = 'cancelled', result = '', tokens = 40,
                      cost = 0.0123, estimated = true, error = vim.NIL }, ctx)
  wait_for('the estimated end', function() return find_line(buf, '■ cancelled') end)
  record('estimated', { line = lines(buf)[#lines(buf)] })
end

-- :checkhealth talos with a client running.
function SCENARIOS.health()
  start()
  vim.cmd('checkhealth talos')
  record('health', { lines = lines(0) })
end

-- Neovim 0.8+'s vim.lsp.start (stubbed on 0.7 over start_client) is what setup uses where it
-- exists, one client per root.
function SCENARIOS.start_api()
  local calls, started = {}, {}
  local start_client, attach = vim.lsp.start_client, vim.lsp.buf_attach_client
  vim.lsp.start = function(config, opts)
    local current = vim.api.nvim_get_current_buf()
    table.insert(calls, { root = config.root_dir, bufnr = opts.bufnr, current = current,
                          name = config.name, deferred = config.init_options.deferredPrompts,
                          conversation = config.init_options.conversation })
    for _, id in ipairs(started) do -- as 0.8 does: running clients and those still starting
      local c = vim.lsp.get_client_by_id(id)
      if c and opts.reuse_client(c, config) then
        attach(current, c.id)
        return c.id
      end
    end
    local id = start_client(config)
    table.insert(started, id)
    attach(current, id)
    return id
  end
  local app = vim.api.nvim_get_current_buf()
  require('talos').setup({ cmd = cfg.cmd, settings = cfg.settings })
  local other = edit(cfg.ws .. '/src/other.py')
  local lib = edit(cfg.other .. '/lib.py')
  wait_for('initialized', function()
    local all = talos_clients()
    return #all == 2 and all[1].initialized and all[2].initialized
  end)
  record('start_api', { calls = calls, app = attached(app), other = attached(other),
                        lib = attached(lib) })
end

local function main()
  SCENARIOS[cfg.scenario]()
end

local function finish()
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    record('error', { message = tostring(err) })
  end
  record('notes', { notes = notes, selects = selects })
  for _, c in ipairs(talos_clients()) do
    c.stop()
  end
  local stopped = vim.wait(5000, function()
    for _, c in ipairs(talos_clients()) do
      if not c.is_stopped() then
        return false
      end
    end
    return true
  end, 20)
  record('done', { ok = ok, stopped = stopped })
  out:close()
  vim.cmd(ok and 'qa!' or 'cq!')
end

vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function()
  vim.schedule(finish)
end })
