import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Conversation, LIMITS, doneMessage, promptParts, promptRow, sendFor, serverEvent, spent } from '../src/conversation';
import { page } from '../src/page';

const FOLDER = 'file:///work/ws';

function events(c: Conversation, ...raw: object[]): (string | undefined)[] {
  return raw.map((r) => {
    const e = serverEvent(r);
    assert.ok(e, `not an event: ${JSON.stringify(r)}`);
    return c.apply(e);
  });
}

test('a task: begin, text streamed in pieces, steps, a proposal that changes state, the end', () => {
  const c = new Conversation();
  events(c,
    { kind: 'begin', task_id: 't1', folder: FOLDER, title: 'fix add()', follows: null },
    { kind: 'step', task_id: 't1', folder: FOLDER, message: 'step 1: thinking' },
    { kind: 'text', task_id: 't1', folder: FOLDER, text: 'Looking at ' },
    { kind: 'text', task_id: 't1', folder: FOLDER, text: '`calc.py`…' },
    { kind: 'step', task_id: 't1', folder: FOLDER, message: 'step 2: propose_edit' },
    { kind: 'proposal', task_id: 't1', folder: FOLDER, proposal: { id: 'p1', path: 'calc.py', status: 'pending', task_id: 't1', hunks: 1 } },
  );
  let t = c.task('t1')!;
  assert.equal(t.title, 'fix add()');
  assert.equal(t.text, 'Looking at `calc.py`…');
  assert.deepEqual(t.steps, ['step 1: thinking', 'step 2: propose_edit']);
  assert.equal(t.end, null);
  assert.deepEqual(c.running.map((x) => x.id), ['t1']);
  const rev = t.rev;
  events(c,
    { kind: 'proposal', task_id: 't1', folder: FOLDER, proposal: { id: 'p1', path: 'calc.py', status: 'applied', task_id: 't1', hunks: 1 } },
    { kind: 'end', task_id: 't1', folder: FOLDER, state: 'done', result: 'Looking at `calc.py`…', error: null, tokens: 1234, cost: 0.03 },
  );
  t = c.task('t1')!;
  assert.ok(t.rev > rev, 'a change bumps the task');
  assert.deepEqual(t.proposals.map((p) => p.status), ['applied'], 'one row per proposal, updated in place');
  assert.deepEqual(t.end, { state: 'done', result: 'Looking at `calc.py`…', error: null, tokens: 1234, cost: 0.03, estimated: false });
  assert.equal(t.text, 'Looking at `calc.py`…', 'a result that streamed is not shown twice');
  assert.deepEqual(c.running, []);
  assert.equal(doneMessage(t), 'Talos t1 done: Looking at `calc.py`… · $0.0300');
});

test('a final answer that did not stream is shown; a failure says why', () => {
  const c = new Conversation();
  events(c, { kind: 'begin', task_id: 't2', folder: FOLDER, title: 'x', follows: null },
    { kind: 'end', task_id: 't2', folder: FOLDER, state: 'done', result: 'The **answer**.\n\nTwo lines.', error: null, tokens: { in: 10, out: 5 }, cost: '0.0001' });
  const t = c.task('t2')!;
  assert.equal(t.text, 'The **answer**.\n\nTwo lines.');
  assert.equal(t.end?.tokens, 15);
  assert.equal(t.end?.cost, 0.0001);
  // one line in a toast: no literal \n\n, no "(talos.task.show for all)"
  assert.equal(doneMessage(t), 'Talos t2 done: The **answer**. Two lines. · $0.0001');
  events(c, { kind: 'begin', task_id: 't3', folder: FOLDER, title: 'y', follows: 't2' },
    { kind: 'end', task_id: 't3', folder: FOLDER, state: 'failed', result: null, error: 'no answer from the model within 120 s', tokens: 0, cost: 0 });
  assert.equal(doneMessage(c.task('t3')!), 'Talos t3 failed: no answer from the model within 120 s · $0.0000');
  events(c, { kind: 'begin', task_id: 't4', folder: FOLDER, title: 'z', follows: null },
    { kind: 'end', task_id: 't4', folder: FOLDER, state: 'cancelled', result: null, error: null, tokens: 0, cost: 0 });
  assert.equal(doneMessage(c.task('t4')!), undefined, 'the person cancelled it: no toast');
  events(c, { kind: 'begin', task_id: 't5', folder: FOLDER, title: 'say hi', follows: null },
    { kind: 'text', task_id: 't5', folder: FOLDER, text: 'Hello\n\nthere [x](command:y)' },
    { kind: 'end', task_id: 't5', folder: FOLDER, state: 'done', result: '', error: null, tokens: 3, cost: 0 });
  assert.equal(doneMessage(c.task('t5')!), 'Talos t5 done: Hello there [x](command:y) · $0.0000', 'an empty result: what streamed');
  events(c, { kind: 'begin', task_id: 't6', folder: FOLDER, title: 'six' },
    { kind: 'end', task_id: 't6', folder: FOLDER, state: 'done', result: 'ok', error: null, tokens: 40, cost: 0.0123, estimated: true });
  assert.equal(doneMessage(c.task('t6')!), 'Talos t6 done: ok · $0.0123 (estimated)', 'usage counted from the text');
  assert.equal(spent(c.task('t6')!.end!), '$0.0123 (estimated)');
  assert.equal(spent(c.task('t5')!.end!), '$0.0000', 'the endpoint reported its usage');
});

test('malformed events are dropped whole', () => {
  for (const bad of [null, 'x', {}, { kind: 'text', task_id: 't1' }, { kind: 'text', task_id: 't 1', text: 'x' }, { kind: 'text', task_id: '../x', text: 'x' },
    { kind: 'nope', task_id: 't1' }, { kind: 'step', task_id: 't1', message: 5 }, { kind: 'proposal', task_id: 't1', proposal: { id: '<p>', path: 'a', status: 'pending' } },
    { kind: 'text', task_id: 'x'.repeat(65), text: 'x' }]) {
    assert.equal(serverEvent(bad), undefined, JSON.stringify(bad));
  }
  for (const bad of [null, {}, { prompt_id: 'q1', message: 'm', actions: [1] }, { prompt_id: 'q 1', message: 'm', actions: [] }, { prompt_id: 'q1', actions: [] }]) {
    assert.equal(promptRow(bad), undefined, JSON.stringify(bad));
  }
});

test('events of a task this window did not see begin still make an entry', () => {
  const c = new Conversation();
  events(c, { kind: 'text', task_id: 't9', folder: FOLDER, text: 'half' });
  assert.equal(c.task('t9')?.text, 'half');
  assert.equal(c.task('t9')?.title, '');
});

test('prompts: with the one running task, loose when it cannot be told; closed or answered, they go', () => {
  const c = new Conversation();
  events(c, { kind: 'begin', task_id: 't1', folder: FOLDER, title: 'a', follows: null });
  c.prompt(promptRow({ prompt_id: 'q1', kind: 'permission', message: 'Run this command?\n  $ make test', actions: ['Allow once', 'Always allow `make test`', 'Deny'] })!);
  assert.deepEqual(c.task('t1')!.prompts.map((p) => p.prompt_id), ['q1']);
  assert.equal(c.findPrompt('q1')?.task_id, 't1');
  c.close('q1', 'Allow once');
  assert.deepEqual(c.task('t1')!.prompts, []);
  assert.deepEqual(c.task('t1')!.answers, ['Allow once']);

  events(c, { kind: 'begin', task_id: 't2', folder: FOLDER, title: 'b', follows: null });
  c.prompt(promptRow({ prompt_id: 'q2', kind: 'question', message: 'Which?', actions: ['pytest', 'unittest', 'Skip'] })!);
  assert.deepEqual(c.loose.map((p) => p.prompt_id), ['q2'], 'two tasks run: whose it is cannot be told');
  // the server names the task (when it does)
  c.prompt(promptRow({ prompt_id: 'q3', kind: 'question', message: 'Which?', actions: ['a', 'Skip'], task_id: 't2' })!);
  assert.deepEqual(c.task('t2')!.prompts.map((p) => p.prompt_id), ['q3']);
  c.close('q2');
  c.close('q3');
  assert.deepEqual(c.loose, []);
  assert.deepEqual(c.task('t2')!.prompts, []);
  assert.deepEqual(c.task('t2')!.answers, [], 'closed by the server: not an answer');
  // a question outlives the task it came with (the task does not wait for it): only the
  // server closes it
  c.prompt(promptRow({ prompt_id: 'q4', kind: 'question', message: 'm', actions: ['x'], task_id: 't2' })!);
  events(c, { kind: 'end', task_id: 't2', folder: FOLDER, state: 'done', result: 'ok', error: null, tokens: 0, cost: 0 });
  assert.equal(c.findPrompt('q4')?.task_id, 't2');
  c.close('q4');
  assert.equal(c.findPrompt('q4'), undefined);
});

test('the input follows up the latest task once it ended; starts one when there is none', () => {
  const c = new Conversation();
  assert.deepEqual(sendFor(c, '  hello  '), { command: 'talos.task.start', argument: { prompt: 'hello' } });
  assert.ok('refused' in sendFor(c, '   '));
  assert.ok('refused' in sendFor(c, 'x'.repeat(20_001)));
  events(c, { kind: 'begin', task_id: 't1', folder: FOLDER, title: 'a', follows: null });
  assert.match((sendFor(c, 'more') as { refused: string }).refused, /still working/);
  events(c, { kind: 'end', task_id: 't1', folder: FOLDER, state: 'done', result: 'ok', error: null, tokens: 1, cost: 0 });
  assert.deepEqual(sendFor(c, 'and now?'), { command: 'talos.task.followUp', argument: { task_id: 't1', prompt: 'and now?' } });
  events(c, { kind: 'begin', task_id: 't2', folder: FOLDER, title: 'and now?', follows: 't1' },
    { kind: 'end', task_id: 't2', folder: FOLDER, state: 'failed', result: null, error: 'x', tokens: 1, cost: 0 });
  assert.deepEqual(sendFor(c, 'again'), { command: 'talos.task.followUp', argument: { task_id: 't2', prompt: 'again' } });
  assert.equal(c.task('t2')!.follows, 't1');
  // "New": what was shown is put away, the next message starts a task
  c.startAfresh();
  assert.equal(c.shown.length, 0);
  assert.deepEqual(sendFor(c, 'fresh'), { command: 'talos.task.start', argument: { prompt: 'fresh' } });
  events(c, { kind: 'begin', task_id: 't3', folder: FOLDER, title: 'fresh', follows: null });
  assert.deepEqual(c.shown.map((t) => t.id), ['t3']);
});

test('the server lost: running tasks end as interrupted, prompts go', () => {
  const c = new Conversation();
  events(c, { kind: 'begin', task_id: 't1', folder: FOLDER, title: 'a', follows: null },
    { kind: 'begin', task_id: 't2', folder: FOLDER, title: 'b', follows: null },
    { kind: 'end', task_id: 't2', folder: FOLDER, state: 'done', result: 'ok', error: null, tokens: 1, cost: 0 });
  c.prompt(promptRow({ prompt_id: 'q1', kind: 'question', message: 'm', actions: ['x'] })!);
  assert.deepEqual(c.serverLost(), ['t1']);
  assert.equal(c.task('t1')!.end?.state, 'interrupted');
  assert.equal(c.findPrompt('q1'), undefined);
  assert.deepEqual(sendFor(c, 'go on'), { command: 'talos.task.followUp', argument: { task_id: 't2', prompt: 'go on' } });
});

test('sizes are bounded: text, steps, tasks', () => {
  const c = new Conversation();
  events(c, { kind: 'begin', task_id: 't0', folder: FOLDER, title: 'a', follows: null });
  const chunk = 'x'.repeat(100_000);
  for (let i = 0; i < 10; i++) events(c, { kind: 'text', task_id: 't0', folder: FOLDER, text: chunk });
  assert.equal(c.task('t0')!.text.length, LIMITS.text);
  for (let i = 0; i < LIMITS.steps + 50; i++) events(c, { kind: 'step', task_id: 't0', folder: FOLDER, message: `step ${i}` });
  assert.equal(c.task('t0')!.steps.length, LIMITS.steps);
  assert.equal(c.task('t0')!.steps.at(-1), `step ${LIMITS.steps + 49}`, 'the latest are kept');
  for (let i = 1; i <= LIMITS.tasks + 5; i++) events(c, { kind: 'begin', task_id: `t${i}`, folder: FOLDER, title: 'n', follows: null });
  assert.equal(c.tasks.length, LIMITS.tasks);
  assert.equal(c.latest?.id, `t${LIMITS.tasks + 5}`);
});

test('a permission prompt for a modal: the first line, then the rest on its lines', () => {
  const message = 'Run this command?\n  $ python -m pytest -q\n  in /work/ws\n\nAlways allow offers `python -m pytest`.';
  assert.deepEqual(promptParts(message), { first: 'Run this command?', detail: '  $ python -m pytest -q\n  in /work/ws\n\nAlways allow offers `python -m pytest`.' });
  assert.deepEqual(promptParts('One line'), { first: 'One line', detail: '' });
});

test("the webview's page: a strict Content-Security-Policy, one script by nonce, nothing from the model", () => {
  const html = page('https://webview.example', 'https://webview.example/c.css', 'https://webview.example/c.js');
  const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1] ?? '';
  assert.match(csp, /^default-src 'none'; /);
  assert.match(csp, /script-src 'nonce-[A-Za-z0-9]{16,}'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
  const nonce = /'nonce-([A-Za-z0-9]+)'/.exec(csp)![1];
  const scripts = [...html.matchAll(/<script\b([^>]*)>/g)];
  assert.equal(scripts.length, 1);
  assert.ok(scripts[0][1].includes(`nonce="${nonce}"`));
  assert.doesNotMatch(html, /\sstyle=|\son\w+=/, 'no inline style or handler');
  assert.notEqual(page('a', 'b', 'c').match(/nonce-(\w+)/)![1], nonce, 'a new nonce each time');
});
