import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { SETTING_NAMES, USER_ONLY } from '../src/settings';

const root = path.join(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const sources = fs.readdirSync(path.join(root, 'src')).map((f) => fs.readFileSync(path.join(root, 'src', f), 'utf8')).join('\n');

test('every contributed command is registered, and every registered one contributed', () => {
  const contributed: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command);
  const registered = [...sources.matchAll(/register(?:Command)?\('(talos\.[A-Za-z.]+)'/g)].map((m) => m[1]);
  assert.deepEqual([...new Set(registered)].sort(), [...contributed].sort());
});

test('menus and key bindings name contributed commands', () => {
  const contributed = new Set(manifest.contributes.commands.map((c: { command: string }) => c.command));
  const menus = Object.values(manifest.contributes.menus).flat() as { command: string }[];
  for (const entry of [...menus, ...manifest.contributes.keybindings]) assert.ok(contributed.has(entry.command), entry.command);
});

test('every server setting is contributed, and the user-only ones cannot be set by a workspace', () => {
  const properties = manifest.contributes.configuration.properties;
  for (const name of SETTING_NAMES) assert.ok(`talos.${name}` in properties, name);
  for (const name of USER_ONLY) assert.equal(properties[`talos.${name}`].scope, 'machine', name);
  // ...and every machine-scoped one is read where a remote window applies it (USER_ONLY).
  const machine = Object.keys(properties).filter((key) => properties[key].scope === 'machine').map((key) => key.replace(/^talos\./, ''));
  assert.deepEqual(machine.sort(), [...USER_ONLY].sort());
});

test("no extension command takes a server command's name (the client registers those itself)", () => {
  const server = ['talos.task.start', 'talos.task.cancel', 'talos.task.list', 'talos.task.show', 'talos.proposal.list', 'talos.proposal.show',
    'talos.proposal.apply', 'talos.proposal.reject', 'talos.proposal.diff', 'talos.undo', 'talos.questions.list', 'talos.question.answer',
    'talos.memory.list', 'talos.memory.remember', 'talos.memory.forget', 'talos.status', 'talos.prompt.answer'];
  const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command);
  assert.deepEqual(contributed.filter((c: string) => server.includes(c)), []);
});
