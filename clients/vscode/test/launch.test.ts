import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { Backoff, findServer, notFoundMessage, serverEnv } from '../src/launch';

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
  const text = notFoundMessage(found.tried);
  assert.match(text, /pip install talos-ls/);
  assert.ok(text.includes(path.join(root, 'ws', '.venv', 'bin', 'talos-ls')));
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
