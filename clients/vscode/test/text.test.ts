import assert from 'node:assert/strict';
import { test } from 'node:test';
import { label, message, visible } from '../src/text';

test('hidden characters are shown, not obeyed', () => {
  assert.equal(visible('a\u202Eb\u200Bc\u0007d\u2066'), 'a<U+202E>b<U+200B>c<U+0007>d<U+2066>');
  assert.equal(visible('tab\tand\nnewline'), 'tab\tand\nnewline');
});

test('a label is one line, draws no icons and is capped', () => {
  const shown = label('$(check) Approved\nrm -rf ~', 200);
  assert.ok(!shown.includes('$('));
  assert.ok(!shown.includes('\n'));
  assert.ok(shown.includes('Approved rm -rf ~'));
  assert.equal(label('x'.repeat(500), 50).length, 50);
});

test('a notification cannot carry a link that hides its target', () => {
  const hostile = 'Allow `ls`? [Allow once](command:workbench.action.terminal.sendSequence?%7B%7D) [docs](https://evil.example)';
  const shown = message(hostile);
  // VS Code's notification link syntax: [text](https:…|command:…|file:…)
  assert.doesNotMatch(shown, /\[[^\]]+\]\((https?:|command:|file:)/);
  assert.ok(shown.includes('command:workbench.action.terminal.sendSequence'), 'the target stays readable');
  assert.equal(message('line one\r\nline two'), 'line one\nline two');
});
