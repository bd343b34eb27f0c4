import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyOutcome, failureOutcome, REVIEW_COMMANDS, reviewOutcome, rewindOutcome, undoOutcome } from '../src/outcome';

test('an Apply that applied is told on the status bar, hunk by hunk', () => {
  assert.deepEqual(applyOutcome('p1', { applied: true, status: 'applied' }, undefined, 'calc.py'), { kind: 'done', text: 'Talos: applied p1 to calc.py' });
  assert.deepEqual(applyOutcome('p1', { applied: true, status: 'partly_applied' }, [0]), { kind: 'done', text: 'Talos: applied change 1 of p1; the rest is still to review' });
  assert.equal(applyOutcome('p1', { applied: true, status: 'partly_applied' }, [0, 2, 3]).text, 'Talos: applied changes 1, 3 and 4 of p1; the rest is still to review');
});

test('an Apply the server refused says why, and that nothing was written', () => {
  const stale = applyOutcome('p1', { applied: false, status: 'stale' }, undefined, 'calc.py');
  assert.equal(stale.kind, 'refused');
  assert.match(stale.text, /^Talos: p1 was not applied: calc\.py changed since it was proposed/);
  assert.match(stale.text, /Nothing was written\. Reject it, or ask Talos to redo it/);
  // without a path (a lens's result carries none)
  assert.match(applyOutcome('p1', { applied: false, status: 'stale' }).text, /its file changed since/);

  const rejected = applyOutcome('p1', { applied: false, status: 'rejected' });
  assert.equal(rejected.kind, 'refused');
  assert.match(rejected.text, /^Talos: p1 was not applied: it was rejected meanwhile \(in another window/);
  assert.match(rejected.text, /Nothing was written\.$/);

  const applied = applyOutcome('p1', { applied: false, status: 'applied' });
  assert.match(applied.text, /^Talos: p1 was not applied again: it was already applied \(in another window/);

  assert.match(applyOutcome('p1', { applied: false, status: 'partly_applied' }, [1]).text, /part of it was applied meanwhile/);
  assert.match(applyOutcome('p1', { applied: false, status: 'undone' }).text, /applied and then undone/);
  assert.match(applyOutcome('p1', { applied: false, status: 'pending' }).text, /the edit did not land/);
  const odd = applyOutcome('p1', { applied: false, status: 'weird$(check)' });
  assert.equal(odd.kind, 'refused');
  assert.ok(!odd.text.includes('$('), odd.text);
  for (const status of ['stale', 'rejected', 'applied', 'partly_applied', 'undone', 'pending', '']) {
    assert.equal(applyOutcome('p1', { applied: false, status }).kind, 'refused', status);
  }
});

test('an undo says the file is back as it was before the proposal', () => {
  assert.deepEqual(undoOutcome({ proposal_id: 'p1', path: 'calc.py', status: 'undone' }), {
    kind: 'done',
    text: 'Talos: undid p1: calc.py is back as it was before p1 was applied',
  });
});

test('a lens or code action result is told; other commands are not', () => {
  assert.deepEqual(REVIEW_COMMANDS, ['talos.proposal.apply', 'talos.proposal.reject', 'talos.undo']);
  const refused = reviewOutcome('talos.proposal.apply', { proposal_id: 'p1', hunks: [0] }, { proposal_id: 'p1', applied: false, status: 'rejected' });
  assert.equal(refused?.kind, 'refused');
  assert.match(refused!.text, /p1 was not applied: it was rejected meanwhile/);
  assert.equal(reviewOutcome('talos.proposal.apply', { proposal_id: 'p1', hunks: [1] }, { proposal_id: 'p1', applied: true, status: 'partly_applied' })?.text, 'Talos: applied change 2 of p1; the rest is still to review');
  assert.equal(reviewOutcome('talos.proposal.apply', { proposal_id: 'p1' }, { proposal_id: 'p1', applied: true, status: 'applied' })?.text, 'Talos: applied p1');
  assert.equal(reviewOutcome('talos.proposal.reject', { proposal_id: 'p1' }, { proposal_id: 'p1', status: 'rejected' })?.text, 'Talos: rejected p1');
  assert.match(reviewOutcome('talos.undo', { proposal_id: 'p1' }, { proposal_id: 'p1', path: 'calc.py', status: 'undone' })!.text, /calc\.py is back as it was before p1/);
  assert.equal(reviewOutcome('talos.task.start', {}, { task_id: 't1' }), undefined);
  assert.equal(reviewOutcome('talos.proposal.apply', {}, undefined), undefined);
  assert.equal(reviewOutcome('talos.proposal.apply', {}, 'nonsense'), undefined);
});

test('a refusal answered as an error is told in plain words, links broken', () => {
  const told = failureOutcome('talos.proposal.reject', 'proposal p1 is rejected (changed elsewhere)');
  assert.deepEqual(told, { kind: 'refused', text: 'Talos: could not reject: proposal p1 is rejected (changed elsewhere)' });
  const undo = failureOutcome('talos.undo', 'calc.py changed after proposal p1 was applied (line 3); [x](command:evil)');
  assert.match(undo.text, /^Talos: could not undo: calc\.py changed after/);
  assert.doesNotMatch(undo.text, /\]\(command:/);
});

test('undoing a task says which files are back, and warns of each file left and why', () => {
  assert.deepEqual(rewindOutcome({ task_id: 't1', restored: ['a.py', 'b.py'], left: [] }), {
    kind: 'done',
    text: 'Talos: undid task t1: restored a.py, b.py',
  });
  const part = rewindOutcome({ task_id: 't1', restored: ['a.py'], left: [{ path: 'c.py', reason: 'c.py changed since\nthe task' }] });
  assert.equal(part.kind, 'refused');
  assert.equal(part.text, 'Talos: task t1 was undone only in part: restored a.py; c.py left as it is: c.py changed since the task'); // one line
  const none = rewindOutcome({ task_id: 't$(x)', restored: [], left: [{ path: 'c.py', reason: 'edited' }] });
  assert.ok(none.text.includes('no file restored') && !none.text.includes('$('), none.text);
});
