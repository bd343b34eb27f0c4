import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Documents, parseProposalPath, parseTaskPath, proposalPath, showing } from '../src/documents';

test('proposal URIs name the proposal, the side and end with the file', () => {
  const p = proposalPath('p1a2b3', 'base', 'src/app.py');
  assert.equal(p, '/p1a2b3/base/src/app.py');
  assert.deepEqual(parseProposalPath(p), { id: 'p1a2b3', side: 'base' });
  assert.deepEqual(parseProposalPath('/p1a2b3/proposed/a/b.ts'), { id: 'p1a2b3', side: 'proposed' });
  assert.deepEqual(parseProposalPath('/p1a2b3.diff'), { id: 'p1a2b3', side: 'diff' }, "the server's own URI");
});

test('anything else in a URI is refused, never sent to the server', () => {
  for (const bad of ['/p1/other/x', '/../p1/base/x', '/p 1/base/x', '/p1', '/', `/${'a'.repeat(65)}/base/x`, '/p1/base%2f/x']) {
    assert.equal(parseProposalPath(bad), undefined, bad);
  }
  assert.equal(parseTaskPath('/t12.md'), 't12');
  assert.equal(parseTaskPath('/t1/../x.md'), undefined);
});

test('the content provider asks the server for the side the URI names', async () => {
  const calls: [string, object][] = [];
  const docs = new Documents(async (method, params) => {
    calls.push([method, params]);
    return `text of ${JSON.stringify(params)}`;
  }, async () => 'unused');
  assert.equal(await docs.proposal('/p9/proposed/src/app.py'), 'text of {"proposal_id":"p9","side":"proposed"}');
  assert.equal(await docs.proposal('/p9.diff'), 'text of {"proposal_id":"p9","side":"diff"}');
  assert.deepEqual(calls.map((c) => c[0]), ['talos/proposalContent', 'talos/proposalContent']);
});

test('a failure says which proposal and why', async () => {
  const docs = new Documents(async () => {
    throw new Error("no proposal 'p9'");
  }, async () => 'x');
  await assert.rejects(docs.proposal('/p9/base/a.py'), /Talos: cannot show proposal p9: no proposal 'p9'/);
  await assert.rejects(docs.proposal('/nope'), /does not name a proposal/);
  const empty = new Documents(async () => null, async () => null);
  await assert.rejects(empty.proposal('/p9/base/a.py'), /sent no text/);
  await assert.rejects(empty.transcript('/t1.md'), /sent no transcript/);
});

test('a transcript comes from talos.task.show', async () => {
  const seen: [string, object][] = [];
  const docs = new Documents(async () => 'x', async (command, argument) => {
    seen.push([command, argument]);
    return '# Task t1';
  });
  assert.equal(await docs.transcript('/t1.md'), '# Task t1');
  assert.deepEqual(seen, [['talos.task.show', { task_id: 't1' }]]);
});

test('the open documents showing a changed proposal are found', () => {
  const open = ['/p1/base/a.py', '/p1/proposed/a.py', '/p2/base/b.py', '/p1.diff'];
  assert.deepEqual(showing(open, new Set(['p1'])), ['/p1/base/a.py', '/p1/proposed/a.py', '/p1.diff']);
});
