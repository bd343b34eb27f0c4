import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blockedMessage, checkSettings, effective, ignoredMessage, ignoredSettings, machineValue, SETTING_NAMES, USER_ONLY, type Layers } from '../src/settings';

const from = (values: Record<string, unknown>) => checkSettings((key) => values[key]);

test('good values pass through; unset ones are sent as null (the server default)', () => {
  const { settings, problems } = from({ model: ' gpt-4o ', baseUrl: 'http://localhost:11434/v1', maxCost: 0.5, maxSteps: 20, permissionMode: 'auto-edit', questionBudgetTurns: 3, promptTimeout: 60, storeUrl: 'redis://127.0.0.1:6379/0', prices: { m: { input: 1, cached_input: 0.5, output: 2 } } });
  assert.deepEqual(problems, []);
  assert.equal(settings.model, 'gpt-4o');
  assert.equal(settings.maxCost, 0.5);
  assert.equal(settings.apiKeyEnv, null);
  assert.deepEqual(settings.prices, { m: { input: 1, cached_input: 0.5, output: 2 } });
  assert.deepEqual(Object.keys(settings).sort(), [...SETTING_NAMES].sort());
});

for (const [name, value, says] of [
  ['maxSteps', 0, 'whole number from 1'],
  ['maxSteps', 2.5, 'whole number'],
  ['maxCost', -1, 'above 0'],
  ['maxCost', Number.NaN, 'above 0'],
  ['permissionMode', 'yolo', 'one of read-only, ask'],
  ['baseUrl', 'file:///etc/passwd', 'http(s) URL'],
  ['baseUrl', 'not a url', 'http(s) URL'],
  ['storeUrl', 'mysql://x', 'sqlite:/// or redis://'],
  ['questionBudgetTurns', '5', 'whole number'],
  ['prices', { m: { input: 1 } }, '"m" needs input, cached_input and output'],
  ['prices', { m: { input: -1, cached_input: 0, output: 0 } }, '0 or more'],
  ['promptTimeout', 0, 'seconds'],
  ['model', 'a\u0007b', 'control characters'],
  ['apiKeyEnv', 'MY KEY', 'NAME of an environment variable'],
  ['readablePaths', '/opt/data', 'list of at most 64 absolute paths'],
  ['readablePaths', ['opt/data'], 'is not an absolute path'],
  ['readablePaths', ['/opt/\u0007'], 'control characters'],
  ['limits', [1024], 'must be an object'],
  ['limits', { forks: 10 }, '"forks" is not a limit'],
  ['limits', { processes: 0 }, 'processes must be a whole number above 0'],
] as [string, unknown, string][]) {
  test(`talos.${name} = ${JSON.stringify(value)} is refused, named, and not sent`, () => {
    const { settings, problems } = from({ [name]: value, maxSteps: name === 'maxSteps' ? value : 7 });
    assert.equal(problems.length, 1);
    assert.ok(problems[0].startsWith(`talos.${name}: `), problems[0]);
    assert.ok(problems[0].includes(says), problems[0]);
    assert.ok(!(name in settings), `${name} must be left out so the server keeps its last good value`);
  });
}

test('a key in settings is refused and never echoed', () => {
  const key = 'sk-proj-0123456789abcdefghijklmnopqrstuv';
  const { settings, problems } = from({ apiKey: key, apiKeyEnv: key });
  assert.equal(problems.length, 2);
  assert.ok(problems.every((p) => !p.includes(key)));
  assert.ok(!JSON.stringify(settings).includes(key));
  // A key that is also a valid variable name is caught by its look.
  const token = 'ghp_0123456789abcdefghijklmnopqrstuvwxyzAB';
  const named = from({ apiKeyEnv: token });
  assert.ok(named.problems[0].startsWith('talos.apiKeyEnv: looks like a key'), named.problems[0]);
  assert.ok(!named.problems[0].includes(token) && !JSON.stringify(named.settings).includes(token));
});

test('the client-only keys never reach the server', () => {
  const { settings } = from({ 'server.command': '/bin/sh', 'trace.server': 'verbose', model: 'm' });
  assert.ok(!JSON.stringify(settings).includes('/bin/sh'));
  assert.ok(!('server' in settings) && !('trace' in settings));
});

test("a repository's workspace settings can make Talos stricter, never looser", () => {
  assert.equal(effective('permissionMode', { defaultValue: 'ask', workspaceValue: 'full-auto' }), 'ask');
  assert.equal(effective('permissionMode', { defaultValue: 'ask', globalValue: 'auto-edit', workspaceFolderValue: 'read-only' }), 'read-only');
  assert.equal(effective('permissionMode', { defaultValue: 'ask', workspaceValue: 'no-such-mode' }), 'ask');
  assert.equal(effective('maxCost', { defaultValue: null, globalValue: 0.5, workspaceValue: 100 }), 0.5);
  assert.equal(effective('maxCost', { defaultValue: null, workspaceValue: 0.2 }), 0.2);
  assert.equal(effective('maxSteps', { defaultValue: 50, workspaceValue: 1e6 }), 50);
  assert.equal(effective('maxSteps', { defaultValue: 50, workspaceValue: 10 }), 10);
});

test('where the key goes, what runs and what tokens cost are the user’s settings only', () => {
  assert.equal(effective('baseUrl', { defaultValue: null, workspaceValue: 'https://evil.example/v1' }), null);
  assert.equal(effective('baseUrl', { defaultValue: null, globalValue: 'http://localhost:11434/v1', workspaceValue: 'https://evil.example/v1' }), 'http://localhost:11434/v1');
  assert.equal(effective('apiKeyEnv', { defaultValue: 'OPENAI_API_KEY', workspaceValue: 'AWS_SECRET_ACCESS_KEY' }), 'OPENAI_API_KEY');
  assert.deepEqual(effective('prices', { defaultValue: null, workspaceValue: { 'gpt-4.1-mini': { input: 0, cached_input: 0, output: 0 } } }), null);
  assert.equal(effective('server.command', { defaultValue: '', workspaceValue: './evil.sh' }), '');
  assert.equal(effective('model', { defaultValue: 'gpt-4.1-mini', workspaceValue: 'qwen2.5-coder' }), 'qwen2.5-coder', 'a project may choose its model');
});

test('what commands may read outside the workspace, and use, are the user’s settings only', () => {
  assert.deepEqual(effective('readablePaths', { defaultValue: null, workspaceValue: ['/home'] }), null);
  assert.deepEqual(effective('readablePaths', { defaultValue: null, globalValue: ['/opt/data'], workspaceValue: ['/'] }), ['/opt/data']);
  assert.deepEqual(effective('limits', { defaultValue: null, workspaceValue: { processes: 1000000 } }), null);
  const { settings, problems } = from({ readablePaths: ['/opt/data'], limits: { processes: 512, cpu_seconds: 60 } });
  assert.deepEqual(problems, []);
  assert.deepEqual(settings.readablePaths, ['/opt/data']);
  assert.deepEqual(settings.limits, { processes: 512, cpu_seconds: 60 });
});

// ---------------------------------------------------------------- remote windows
// What VS Code's inspect() reported in code-server 4.100 (Code 1.100), a remote window, for a
// machine-scoped setting: the User value in globalLocalValue (and, merged, in globalValue), the
// Remote one in globalRemoteValue.
const LOCAL = 'http://localhost:11434/v1';
const userOnly: Layers = { defaultValue: null, globalLocalValue: LOCAL, globalValue: LOCAL };
const inRemote: Layers = { defaultValue: null, globalRemoteValue: LOCAL, globalValue: LOCAL };
const both: Layers = { defaultValue: null, globalLocalValue: 'http://user/v1', globalRemoteValue: LOCAL, globalValue: LOCAL };

test('a local window applies User settings', () => {
  assert.deepEqual(machineValue({ defaultValue: null, globalValue: LOCAL }, false), { value: LOCAL, source: 'user', ignored: false });
  assert.deepEqual(machineValue({ defaultValue: 'OPENAI_API_KEY' }, false), { value: 'OPENAI_API_KEY', source: 'default', ignored: false });
  assert.equal(effective('baseUrl', { defaultValue: null, globalValue: LOCAL }, false), LOCAL);
});

test('a remote window applies machine settings from Remote settings only', () => {
  assert.deepEqual(machineValue(userOnly, true), { value: null, source: 'default', ignored: true }, 'a User value is ignored, even if the merged value shows it');
  assert.deepEqual(machineValue(inRemote, true), { value: LOCAL, source: 'remote', ignored: false });
  assert.deepEqual(machineValue(both, true), { value: LOCAL, source: 'remote', ignored: false }, 'Remote wins; the User one is not reported');
  assert.deepEqual(machineValue({ defaultValue: null, globalValue: LOCAL }, true), { value: LOCAL, source: 'remote', ignored: false }, 'a host that does not split the layers: its merged value');
  assert.equal(effective('baseUrl', userOnly, true), null);
  assert.equal(effective('baseUrl', inRemote, true), LOCAL);
  assert.equal(effective('server.command', { defaultValue: '', globalLocalValue: '/opt/talos-ls', globalValue: '/opt/talos-ls' }, true), '');
  assert.equal(effective('baseUrl', { ...inRemote, workspaceValue: 'https://evil.example/v1' }, true), LOCAL, 'still never from the workspace');
  // Settings that are not machine-scoped apply from User settings in a remote window too.
  assert.equal(effective('model', { defaultValue: 'gpt-4.1-mini', globalLocalValue: 'qwen', globalValue: 'qwen' }, true), 'qwen');
});

test('the settings a remote window ignores, and which of them keep tasks from starting', () => {
  const layers: Record<string, Layers> = { baseUrl: userOnly, prices: { defaultValue: null, globalLocalValue: { m: {} }, globalValue: { m: {} } }, storeUrl: inRemote, model: { globalLocalValue: 'x' } };
  const ignored = ignoredSettings((key) => layers[key], true);
  assert.deepEqual(ignored, { names: ['talos.baseUrl', 'talos.prices'], blocking: ['talos.baseUrl'] });
  assert.deepEqual(ignoredSettings((key) => layers[key], false), { names: [], blocking: [] }, 'a local window ignores none');
  assert.deepEqual(ignoredSettings((key) => (key === 'apiKeyEnv' ? userOnly : undefined), true).blocking, ['talos.apiKeyEnv']);
  const all = ignoredSettings(() => userOnly, true);
  assert.deepEqual(all.names, [...USER_ONLY].map((n) => `talos.${n}`));
  assert.deepEqual(all.blocking, ['talos.baseUrl', 'talos.apiKeyEnv']);
});

test('what the person is told: which settings, why it matters, where they go', () => {
  const blocking = ignoredMessage({ names: ['talos.baseUrl', 'talos.prices'], blocking: ['talos.baseUrl'] }, 'ssh-remote');
  assert.equal(
    blocking,
    'Talos is not started: talos.baseUrl and talos.prices are only in your User settings, which VS Code does not apply in this remote window (ssh-remote), ' +
      'so your code and key would go to the default endpoint ($OPENAI_BASE_URL or OpenAI) instead of yours. ' +
      'Put them in your Remote settings (Open Remote Settings), where VS Code reads machine settings in a remote window. Talos starts once talos.baseUrl is there.',
  );
  const warning = ignoredMessage({ names: ['talos.prices'], blocking: [] }, 'wsl');
  assert.equal(warning, 'Talos: talos.prices is only in your User settings, which VS Code does not apply in this remote window (wsl): the default is used. Put it in your Remote settings (Open Remote Settings), where VS Code reads machine settings in a remote window.');
  const three = ignoredMessage({ names: ['talos.a', 'talos.b', 'talos.c'], blocking: [] }, 'x');
  assert.ok(three.startsWith('Talos: talos.a, talos.b and talos.c are only') && three.includes('the defaults are used'), three);
  const key = ignoredMessage({ names: ['talos.apiKeyEnv'], blocking: ['talos.apiKeyEnv'] }, 'x');
  assert.ok(key.includes("another variable's key ($OPENAI_API_KEY) would be sent instead of yours"), key);
  const refused = blockedMessage({ names: ['talos.baseUrl'], blocking: ['talos.baseUrl'] });
  assert.equal(refused, 'Talos: no task starts while talos.baseUrl is only in your User settings, which this remote window does not apply (your code and key would go to the default endpoint ($OPENAI_BASE_URL or OpenAI) instead of yours). Put it in your Remote settings (Open Remote Settings).');
});
