-- Headless Neovim 0.7.2 playing the person reviewing Talos's proposals: driven by
-- tests/nvim/test_neovim.py. Every step writes one JSON line to the results file; the test
-- asserts on those. Parameters come in a JSON file named by $TALOS_E2E_CONFIG:
--   {scenario, cmd, root, results, init_options}; the file under review is Neovim's argument.
-- Every wait polls with vim.wait (never a bare sleep), and whatever happens the client is
-- stopped and Neovim quits.

local cfg = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv('TALOS_E2E_CONFIG')), '\n'))
local out = assert(io.open(cfg.results, 'a'))
local WAIT_MS = 20000
local REQUEST_MS = 15000

local function record(step, values)
  values = values or {}
  values.step = step
  out:write(vim.fn.json_encode(values), '\n')
  out:flush()
end

local client, bufnr -- the Talos client, the buffer under review

-- What the server sent on its own.
local messages = {} -- window/showMessage texts
local prompts = {} -- window/showMessageRequest texts (each dismissed)
local ended = {} -- progress tokens that ended -> their end message
local applies = {} -- each workspace/applyEdit: its version, the buffer's, the answer
local type_in_flight = nil -- {first, last, text}: lines to replace while the next edit is sent

local default_progress = vim.lsp.handlers['$/progress']
local default_apply = vim.lsp.handlers['workspace/applyEdit']

local handlers = {
  -- The default blocks a headless Neovim forever: dismiss every prompt (record it).
  ['window/showMessageRequest'] = function(_, params)
    table.insert(prompts, params.message)
    return vim.NIL
  end,
  ['window/showMessage'] = function(_, params)
    table.insert(messages, params.message)
    return vim.NIL
  end,
  ['$/progress'] = function(err, params, ctx, config)
    if params and type(params.value) == 'table' and params.value.kind == 'end' then
      ended[params.token] = params.value.message or ''
    end
    return default_progress(err, params, ctx, config)
  end,
  ['workspace/applyEdit'] = function(err, params, ctx, config)
    local change = params.edit.documentChanges[1]
    local typed = type_in_flight
    if typed then
      -- The person types while the edit is on its way: the edit is for the old version.
      type_in_flight = nil
      vim.api.nvim_buf_set_lines(bufnr, typed.first, typed.last, false, { typed.text })
    end
    local answer = default_apply(err, params, ctx, config)
    table.insert(applies, {
      edit_version = change.textDocument.version,
      buffer_version = vim.lsp.util.buf_versions[bufnr],
      typed = typed and typed.text or vim.NIL,
      answer = answer,
    })
    return answer
  end,
  ['talos/status'] = function() end,
  ['talos/proposals'] = function() end,
}

local function lines()
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

local function wait_for(what, check)
  local value
  local ok = vim.wait(WAIT_MS, function()
    value = check()
    return value
  end, 20)
  if not ok then
    error('timed out waiting for ' .. what, 0)
  end
  return value
end

local function request(method, params)
  local response, reason = client.request_sync(method, params, REQUEST_MS, bufnr)
  if not response then
    error(method .. ' got no response: ' .. tostring(reason), 0)
  end
  if response.err then
    error(method .. ' failed: ' .. vim.inspect(response.err), 0)
  end
  return response.result
end

local function command(name, argument)
  return request('workspace/executeCommand', { command = name, arguments = { argument } })
end

local function diagnostics(proposal_id)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if proposal_id == nil or d.code == proposal_id then
      table.insert(found, {
        lnum = d.lnum, end_lnum = d.end_lnum, source = d.source or vim.NIL,
        severity = d.severity, message = d.message, code = d.code or vim.NIL,
      })
    end
  end
  return found
end

local function actions_at(line)
  local result = request('textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = { start = { line = line, character = 0 }, ['end'] = { line = line, character = 0 } },
    context = { diagnostics = {} },
  })
  return result == vim.NIL and {} or (result or {})
end

local function titles(actions)
  return vim.tbl_map(function(a) return a.title end, actions)
end

local function find(actions, title)
  for _, a in ipairs(actions) do
    if a.title == title then
      return a
    end
  end
  error('no code action ' .. title .. ' among ' .. vim.inspect(titles(actions)), 0)
end

local function run(action)
  return command(action.command.command, action.command.arguments[1])
end

-- A task that proposes an edit (the scripted model's next two replies), until it ended and
-- its proposal is shown as diagnostics. Returns the proposal's id.
local function propose(name, count)
  local started = command('talos.task.start', { prompt = name })
  local token = 'talos/task/' .. started.task_id
  wait_for('the end of ' .. name, function() return ended[token] end)
  local proposals = command('talos.proposal.list', { uri = vim.uri_from_bufnr(bufnr) })
  local pid
  for _, p in ipairs(proposals) do
    if p.task_id == started.task_id then
      pid = p.id
    end
  end
  if not pid then
    error(name .. ' made no proposal: ' .. vim.inspect(proposals), 0)
  end
  local shown = wait_for('the diagnostics of ' .. pid, function()
    local found = diagnostics(pid)
    return #found == count and found
  end)
  record(name, { task_id = started.task_id, ended = ended[token], proposal_id = pid,
                 diagnostics = shown })
  return pid
end

local function review()
  -- The proposal's diagnostics, its hunk's code action, the buffer changed by that hunk only;
  -- the other hunk stays to review.
  local pid = propose('propose', 2)
  local actions = actions_at(1)
  local lenses = request('textDocument/codeLens', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  })
  record('actions', {
    line = 1, titles = titles(actions),
    lenses = vim.tbl_map(function(l) return { l.range.start.line, l.command.title } end, lenses),
    -- no window/showDocument in Neovim 0.7: the diff is only returned
    diff = run(find(actions, 'Show diff of ' .. pid)),
  })
  local result = run(find(actions, 'Apply this hunk (1 of 2)'))
  record('apply_hunk', { result = result, lines = lines() })
  local rest = wait_for('the other hunk\'s diagnostic alone', function()
    local found = diagnostics(pid)
    return #found == 1 and found[1].lnum == 5 and found
  end)
  record('after_apply', { diagnostics = rest, actions = titles(actions_at(5)),
                          -- {} would be sent as [] (an empty Lua table is a JSON list)
                          proposals = command('talos.proposal.list', vim.empty_dict()) })

  -- The person types: the rest of the proposal turns stale, and applying it is refused.
  vim.api.nvim_buf_set_lines(bufnr, -1, -1, false, { '# typed' })
  local stale = wait_for('the stale diagnostic', function()
    local found = diagnostics(pid)
    return #found == 1 and found[1].message:find('stale', 1, true) and found
  end)
  record('typed', { diagnostics = stale, actions = titles(actions_at(stale[1].lnum)) })
  result = command('talos.proposal.apply', { proposal_id = pid })
  record('apply_stale', { result = result, lines = lines() })

  -- The person types while an edit is on its way: Neovim skips the edit made for the old
  -- version (yet answers applied: true); the server sees the buffer and says not applied.
  local second = propose('propose again', 1)
  type_in_flight = { first = -1, last = -1, text = '# typed in flight' }
  result = run(find(actions_at(5), 'Apply ' .. second))
  record('apply_in_flight', { result = result, lines = lines(), applies = applies })
  local after = wait_for('the in-flight proposal stale', function()
    local found = diagnostics(second)
    return #found == 1 and found[1].message:find('stale', 1, true) and found
  end)
  record('after_in_flight', { diagnostics = after, lines = lines() })
end

-- The person types on the hunk's own line while its edit is on the way, before the buffer
-- ever changed (its version is still the didOpen's 0).
local function first_edit_in_flight()
  local pid = propose('propose', 2)
  type_in_flight = { first = 1, last = 2, text = '    return 1  # mine' }
  local result = run(find(actions_at(1), 'Apply this hunk (1 of 2)'))
  record('apply_in_flight', { result = result, lines = lines(), applies = applies,
                              diagnostics = diagnostics(pid) })
end

-- The whole proposal applied from its code action, then undone from another.
local function apply_all_then_undo()
  local pid = propose('propose', 2)
  local result = run(find(actions_at(5), 'Apply ' .. pid .. ' (all 2 changes)'))
  record('apply_all', { result = result, lines = lines() })
  wait_for('the diagnostics gone', function() return #diagnostics(pid) == 0 end)
  local actions = actions_at(0)
  record('applied', { titles = titles(actions) })
  result = run(find(actions, 'Undo ' .. pid))
  record('undo', { result = result, lines = lines() })
end

local SCENARIOS = {
  review = review, first_edit_in_flight = first_edit_in_flight,
  apply_all_then_undo = apply_all_then_undo,
}

local function main()
  bufnr = vim.api.nvim_get_current_buf() -- the file given on the command line
  local id = vim.lsp.start_client({
    name = 'talos', cmd = cfg.cmd, root_dir = cfg.root, init_options = cfg.init_options,
    handlers = handlers,
  })
  if not id then
    error('vim.lsp.start_client failed', 0)
  end
  client = vim.lsp.get_client_by_id(id)
  vim.lsp.buf_attach_client(bufnr, id)
  wait_for('the server to initialize', function() return client.initialized end)
  record('initialized', { client_id = id, buffer = lines() })

  SCENARIOS[cfg.scenario]()
end

local function finish()
  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    record('error', { message = tostring(err) })
  end
  record('messages', { shown = messages, prompts = prompts })
  if client then
    client.stop()
    local stopped = vim.wait(5000, function() return client.is_stopped() end, 20)
    record('stopped', { stopped = stopped })
  end
  record('done', { ok = ok })
  out:close()
  vim.cmd(ok and 'qa!' or 'cq!')
end

vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function()
  vim.schedule(finish)
end })
