import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { Backoff, crashLoopMessage, findServer, notFoundMessage, searchedPath, serverEnv, startFailureMessage, stderrExcerpt, StderrTail } from '../src/launch';

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'talos-launch-'));
}

function program(file: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '#!/bin/sh\n', { mode: 0o755 });
  return file;
}

test("the workspace's .venv wins over PATH", () => {
  const root = tmp();
  const venv = program(path.join(root, 'ws', '.venv', 'bin', 'talos-ls'));
  const onPath = program(path.join(root, 'bin', 'talos-ls'));
  assert.equal(findServer('', [path.join(root, 'ws')], path.join(root, 'bin'), 'linux').command, venv);
  assert.equal(findServer('', [path.join(root, 'other')], path.join(root, 'bin'), 'linux').command, onPath);
});

test('a configured path is used as is; a name is looked up on PATH', () => {
  const root = tmp();
  const custom = program(path.join(root, 'opt', 'my-talos'));
  program(path.join(root, 'bin', 'talos-ls-dev'));
  assert.equal(findServer(custom, [], '', 'linux').command, custom);
  assert.equal(findServer('talos-ls-dev', [], path.join(root, 'bin'), 'linux').command, path.join(root, 'bin', 'talos-ls-dev'));
});

test('not found: every place tried is named, with the fix', () => {
  const root = tmp();
  fs.writeFileSync(path.join(root, 'talos-ls'), 'not executable', { mode: 0o644 });
  const found = findServer('', [path.join(root, 'ws')], root, 'linux');
  assert.equal(found.command, undefined);
  assert.deepEqual(found.tried, [path.join(root, 'ws', '.venv', 'bin', 'talos-ls'), path.join(root, 'ws', 'venv', 'bin', 'talos-ls'), 'talos-ls on PATH']);
  const text = notFoundMessage(found.tried, `${root}:/usr/bin`);
  assert.match(text, /pip install talos-ls/);
  assert.ok(text.includes(path.join(root, 'ws', '.venv', 'bin', 'talos-ls')));
  assert.ok(text.includes(`PATH searched (VS Code's, from your login shell, which may differ from your terminal's): ${root}:/usr/bin.`), text);
  assert.ok(text.endsWith('or set talos.server.command to its path.'), text);
  const remote = notFoundMessage(found.tried, '/usr/bin', true);
  assert.ok(remote.includes('in your Remote settings (a remote window does not apply it from User settings)'), remote);
  assert.equal(findServer(path.join(root, 'missing'), [], root, 'linux').tried[0], path.join(root, 'missing'));
});

test('the key goes into the environment under the configured name only', () => {
  const env = serverEnv({ PATH: '/bin', OPENAI_API_KEY: 'from-env' }, 'GROQ_KEY', 'sk-secret');
  assert.equal(env.GROQ_KEY, 'sk-secret');
  assert.equal(env.OPENAI_API_KEY, 'from-env');
  assert.equal(serverEnv({ OPENAI_API_KEY: 'from-env' }, null, undefined).OPENAI_API_KEY, 'from-env');
  assert.equal(serverEnv({}, null, 'k').OPENAI_API_KEY, 'k');
});

test('restarts back off, then give up after five crashes in three minutes', () => {
  const backoff = new Backoff();
  const delays = [0, 1, 2, 3, 4].map((i) => backoff.crashed(1000 * i));
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000]);
  assert.equal(backoff.crashed(5000), undefined);
  backoff.reset();
  assert.equal(backoff.crashed(6000), 1000);
});

test('crashes far apart do not add up', () => {
  const backoff = new Backoff();
  for (let i = 0; i < 10; i++) assert.equal(backoff.crashed(i * 4 * 60_000), 1000);
});

test('the PATH searched is bounded, and each entry shown inert', () => {
  assert.equal(searchedPath(''), '(empty)');
  assert.equal(searchedPath('/a::/b'), '/a:/b');
  const long = Array.from({ length: 100 }, (_, i) => `/opt/tool-${i}/bin`).join(':');
  const shown = searchedPath(long);
  assert.ok(shown.length < 650, `${shown.length}`);
  assert.match(shown, /^\/opt\/tool-0\/bin:\/opt\/tool-1\/bin:.* … and \d+ more$/);
  const kept = shown.replace(/ … and (\d+) more$/, '').split(':').length;
  assert.equal(kept + Number(/and (\d+) more/.exec(shown)![1]), 100);
  assert.equal(searchedPath('/x\u202e/bin:[a](command:evil)'), '/x<U+202E>/bin:[a](\u200bcommand:evil)');
  const huge = searchedPath(`/${'d'.repeat(5000)}`);
  assert.ok(huge.length <= 200, 'one huge entry is cut too');
});

test("the server's stderr: the last lines of this process, bounded, the key replaced", () => {
  const tail = new StderrTail(3, 20);
  tail.reset(['sk-secret-123']);
  for (const line of ['one', '', 'two  ', 'key=sk-secret-123', 'x'.repeat(50)]) tail.push(line);
  assert.deepEqual(tail.last(5), ['two', 'key=<the API key>', `${'x'.repeat(19)}…`]);
  assert.deepEqual(tail.last(1), [`${'x'.repeat(19)}…`]);
  tail.reset();
  assert.deepEqual(tail.last(), []);
  tail.push('again sk-secret-123');
  assert.deepEqual(tail.last(), ['again <the API key>'], 'the secret is kept across processes');
});

test('the excerpt is one inert line, the end kept', () => {
  const lines = ['Traceback (most recent call last):', '  File "x.py", line 1', "ModuleNotFoundError: No module named 'talos_ls'"];
  assert.equal(stderrExcerpt(lines), `Traceback (most recent call last): ⏎   File "x.py", line 1 ⏎ ModuleNotFoundError: No module named 'talos_ls'`);
  const hostile = stderrExcerpt(['[Fix](command:workbench.action.quit) \u202eevil\u0007']);
  assert.equal(hostile, '[Fix](\u200bcommand:workbench.action.quit) <U+202E>evil<U+0007>');
  const long = stderrExcerpt(['a'.repeat(2000), 'the cause']);
  assert.ok(long.length <= 501 && long.startsWith('…') && long.endsWith(' ⏎ the cause'), long);
});

test('a server that dies at start: its last output and what to do, in one message', () => {
  const text = startFailureMessage('/venv/bin/talos-ls', ['Traceback', "ImportError: cannot import name 'x'"], 'write EPIPE');
  assert.ok(text.startsWith('Talos: talos-ls (/venv/bin/talos-ls) stopped as it started. Its last output: "Traceback ⏎ ImportError: cannot import name \'x\'".'), text);
  assert.ok(!text.includes('EPIPE'), 'the transport error is no cause');
  assert.match(text, /Run it in a terminal to see the whole error; reinstall it with "pip install talos-ls", or set talos\.server\.command to its path\.$/);
  const silent = startFailureMessage('/bin/talos-ls', [], 'spawn EACCES');
  assert.ok(silent.includes('It wrote nothing on stderr (spawn EACCES).'), silent);
  assert.ok(startFailureMessage('/bin/talos-ls', [], 'x', true).includes('in your Remote settings'));
  const loop = crashLoopMessage(['MemoryError']);
  assert.equal(loop, 'Talos: the language server crashed 5 times in 3 minutes and was not restarted. Its last output: "MemoryError". Run Talos: Restart to start it again; Show Log has the rest.');
});
