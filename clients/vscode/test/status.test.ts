import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dollars, statusView, tokens, type ServerStatus } from '../src/status';

function status(over: Partial<ServerStatus> = {}): ServerStatus {
  return {
    running: [],
    tokens_in: 0,
    tokens_out: 0,
    cost_session: '0',
    open_questions: 0,
    store: { url: 'sqlite:////tmp/t.db', available: true, problem: null },
    settings: { model: 'gpt-4.1-mini', priced: true, maxCost: null, permissionMode: 'ask' },
    folders: [{ root: '/w', turn: 3, open_questions: 0, budget_opens_at_turn: 6, index: { ready: true, files: 12, watched_by: 'editor' }, sandbox: { available: true, detail: 'bubblewrap 0.8.0' } }],
    ...over,
  };
}

test('idle: the session cost, nothing else', () => {
  const view = statusView(status({ cost_session: '0.0412' }), 'running');
  assert.equal(view.text, '$(hubot) Talos $0.0412');
  assert.equal(view.warning, false);
  assert.equal(view.error, false);
});

test('running tasks and open questions are counted', () => {
  const running = [{ id: 't1', title: 'fix it', state: 'running', step: 'step 2: search', cost: '0.01' }, { id: 't2', title: 'b', state: 'queued', step: null, cost: '0' }];
  const view = statusView(status({ running, open_questions: 1, cost_session: '1.5' }), 'running');
  assert.equal(view.text, '$(sync~spin) Talos ▶2 $1.50 ?1');
  assert.match(view.tooltip, /Running \(2\):\n {2}fix it · running · step 2: search · \$0\.0100/);
  assert.match(view.tooltip, /Open questions: 1/);
});

test('an unpriced model shows tokens, not a cost that always reads $0', () => {
  const view = statusView(status({ tokens_in: 41200, tokens_out: 2300, settings: { model: 'llama3', priced: false } }), 'running');
  assert.equal(view.text, '$(hubot) Talos 43.5k tok');
  assert.match(view.tooltip, /llama3 \(no price/);
  assert.doesNotMatch(view.tooltip, /\$0/);
});

test('a degraded store or sandbox turns the item to a warning and says why', () => {
  const degraded = status({ store: { url: 'redis://h', available: false, problem: 'cannot reach store redis://h: refused' } });
  degraded.folders[0].sandbox = { available: false, detail: 'bwrap not found: apt-get install bubblewrap' };
  const view = statusView(degraded, 'running');
  assert.equal(view.warning, true);
  assert.ok(view.text.startsWith('$(warning) Talos'));
  assert.match(view.tooltip, /store unavailable: cannot reach store redis:\/\/h: refused/);
  assert.match(view.tooltip, /sandbox unavailable in \/w: bwrap not found/);
});

test('an MCP server that failed or stopped turns the item to a warning, named as plain text', () => {
  const s = status();
  s.folders[0].mcp = [
    { name: 'git', state: 'ready', error: '' },
    { name: 'web', state: 'failed', error: 'did not start within 30 s' },
    { name: '$(check)x', state: 'restarting', error: 'it exited (code 3)' },
  ];
  const view = statusView(s, 'running');
  assert.equal(view.warning, true);
  assert.match(view.tooltip, /MCP server web failed: did not start within 30 s/);
  assert.match(view.tooltip, /stopped: it exited \(code 3\)/);
  assert.doesNotMatch(view.tooltip, /MCP server git/);
  assert.doesNotMatch(view.tooltip, /\$\(check\)/);
});

test('the connection: starting, failed', () => {
  assert.equal(statusView(undefined, 'starting').text, '$(loading~spin) Talos');
  const failed = statusView(status(), 'failed');
  assert.equal(failed.error, true);
  assert.match(failed.tooltip, /not running/);
});

test("a task title cannot draw icons or hide text in the status tooltip", () => {
  const running = [{ id: 't1', title: '$(check) done\u202Egnp.exe\nApprove', state: 'running', step: null, cost: '0' }];
  const view = statusView(status({ running }), 'running');
  assert.ok(!view.tooltip.includes('$(check)'));
  assert.ok(view.tooltip.includes('<U+202E>'));
  assert.ok(!view.tooltip.includes('\u202E'));
  assert.match(view.tooltip, /done<U\+202E>gnp\.exe Approve/);
});

test('the budget line says when the next question may come', () => {
  assert.match(statusView(status(), 'running').tooltip, /turn 3, next question from turn 6, 12 files indexed/);
  const open = status();
  open.folders[0].budget_opens_at_turn = null;
  open.folders[0].index = { ready: false, files: 40, watched_by: 'server' };
  assert.match(statusView(open, 'running').tooltip, /turn 3, a question may be asked, indexing \(40 files so far\)/);
});

test('dollars and tokens', () => {
  assert.equal(dollars('0'), '$0.0000');
  assert.equal(dollars('0.00015'), '$0.0001');
  assert.equal(dollars('0.00002'), '<$0.0001');
  assert.equal(dollars('12.345'), '$12.35');
  assert.equal(dollars('nonsense'), '$?');
  assert.equal(tokens(999), '999');
  assert.equal(tokens(1500), '1.5k');
  assert.equal(tokens(2_500_000), '2.5M');
});

test('blocked: a warning that says why, and that a click checks again', () => {
  const view = statusView(undefined, 'blocked', 'Talos is not started: talos.baseUrl is only in your User settings.');
  assert.equal(view.text, '$(warning) Talos');
  assert.equal(view.warning, true);
  assert.equal(view.error, false);
  assert.equal(view.tooltip, 'Talos is not started: talos.baseUrl is only in your User settings.\n\nClick to check again.');
});
