/**
 * The `talos.*` settings, checked here before they reach the server, so a typo is named where
 * it was made (the server checks them again and keeps its last good value). Pure: unit-tested.
 * The API key is never a setting: it lives in SecretStorage and reaches the server only through
 * its environment, under the name `talos.apiKeyEnv` gives.
 */

export const PERMISSION_MODES = ['read-only', 'ask', 'auto-edit', 'full-auto'] as const;
/** The server names the schemes it supports when it refuses one; this catches the typos. */
const STORE_URL = /^(sqlite|rediss?)(\+[a-z]+)?:\/\//i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Values that look like a key rather than the name of a variable holding one. */
const KEYISH = /^(sk-|sk_|ghp_|gh[ousr]_|xox[abp]-|AKIA)|^[A-Za-z0-9_-]{32,}$/;

/** The server's settings (its `initializationOptions` and `talos` configuration section). */
export interface ServerSettings {
  model?: string | null;
  baseUrl?: string | null;
  apiKeyEnv?: string | null;
  prices?: Record<string, { input: number; cached_input: number; output: number }> | null;
  maxCost?: number | null;
  maxSteps?: number | null;
  contextWindow?: number | null;
  maxOutputTokens?: number | null;
  permissionMode?: string | null;
  storeUrl?: string | null;
  questionBudgetTurns?: number | null;
  promptTimeout?: number | null;
  readablePaths?: string[] | null;
  limits?: Partial<Record<(typeof LIMITS)[number], number>> | null;
}

/** The keys of `talos.limits`, as the server reads them. */
export const LIMITS = ['processes', 'memory_mb', 'tmp_mb', 'file_mb', 'cpu_seconds'] as const;

export interface Checked {
  settings: ServerSettings;
  /** One line per refused setting, naming it; never echoing a value that could be a key. */
  problems: string[];
}

type Check = (value: unknown) => unknown;

function text(value: unknown): string {
  if (typeof value !== 'string' || !value.trim() || value.length > 200) throw new Error('must be a non-empty string of at most 200 characters');
  if (/[\u0000-\u001f]/.test(value)) throw new Error('must not contain control characters');
  return value.trim();
}

function wholeNumber(min: number, max: number): Check {
  return (value) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new Error(`must be a whole number from ${min} to ${max}`);
    return value;
  };
}

function positive(max: number, unit: string): Check {
  return (value) => {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > max) throw new Error(`must be a number of ${unit} above 0 and at most ${max}`);
    return value;
  };
}

const CHECKS: Record<keyof ServerSettings, Check> = {
  model: text,
  baseUrl(value) {
    const url = text(value);
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error('must be an http(s) URL such as http://localhost:11434/v1');
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('must be an http(s) URL such as http://localhost:11434/v1');
    return url;
  },
  apiKeyEnv(value) {
    if (typeof value !== 'string' || !ENV_NAME.test(value)) throw new Error('must be the NAME of an environment variable, such as OPENAI_API_KEY');
    if (KEYISH.test(value)) throw new Error('looks like a key: give the NAME of the variable that holds it; use "Talos: Set API Key" for the key');
    return value;
  },
  prices(value) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('must be an object {"model": {"input", "cached_input", "output"}}');
    const out: Record<string, { input: number; cached_input: number; output: number }> = {};
    for (const [model, entry] of Object.entries(value)) {
      const e = entry as Record<string, unknown>;
      const fields = ['input', 'cached_input', 'output'] as const;
      if (typeof e !== 'object' || e === null || !fields.every((f) => typeof e[f] === 'number' && Number.isFinite(e[f]) && (e[f] as number) >= 0)) {
        throw new Error(`${JSON.stringify(model)} needs input, cached_input and output: USD per million tokens, 0 or more`);
      }
      out[model] = { input: e.input as number, cached_input: e.cached_input as number, output: e.output as number };
    }
    return out;
  },
  maxCost: positive(1_000_000, 'US dollars'),
  maxSteps: wholeNumber(1, 1_000_000),
  contextWindow: wholeNumber(1024, 100_000_000),
  maxOutputTokens: wholeNumber(1, 1_000_000),
  permissionMode(value) {
    if (typeof value !== 'string' || !(PERMISSION_MODES as readonly string[]).includes(value)) throw new Error(`must be one of ${PERMISSION_MODES.join(', ')}`);
    return value;
  },
  storeUrl(value) {
    const url = text(value);
    if (!STORE_URL.test(url)) throw new Error('must be a sqlite:/// or redis:// URL');
    return url;
  },
  questionBudgetTurns: wholeNumber(1, 1000),
  promptTimeout: positive(86400, 'seconds'),
  readablePaths(value) {
    if (!Array.isArray(value) || value.length > 64) throw new Error('must be a list of at most 64 absolute paths');
    for (const entry of value) {
      if (typeof entry !== 'string' || !entry.startsWith('/')) throw new Error(`${JSON.stringify(entry)} is not an absolute path`);
      if (/[\u0000-\u001f\u007f]/.test(entry)) throw new Error('a path must not contain control characters');
    }
    return value;
  },
  limits(value) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`must be an object with any of ${LIMITS.join(', ')}`);
    for (const [key, entry] of Object.entries(value)) {
      if (!(LIMITS as readonly string[]).includes(key)) throw new Error(`${JSON.stringify(key)} is not a limit: ${LIMITS.join(', ')}`);
      if (typeof entry !== 'number' || !Number.isInteger(entry) || entry < 1) throw new Error(`${key} must be a whole number above 0`);
    }
    return value;
  },
};

export const SETTING_NAMES = Object.keys(CHECKS) as (keyof ServerSettings)[];

/**
 * The server's settings from the `talos` configuration section (`get` reads one key). An
 * unset or null value is sent as null (the server's default); a refused one is left out, so
 * the server keeps its last good value, and named in `problems`.
 */
export function checkSettings(get: (key: string) => unknown): Checked {
  const settings: Record<string, unknown> = {};
  const problems: string[] = [];
  if (get('apiKey') !== undefined && get('apiKey') !== null) {
    problems.push('talos.apiKey: the key never goes in settings; use "Talos: Set API Key" (kept in the OS keychain)');
  }
  for (const name of SETTING_NAMES) {
    const value = get(name);
    if (value === undefined || value === null || value === '') {
      settings[name] = null;
      continue;
    }
    try {
      settings[name] = CHECKS[name](value);
    } catch (error) {
      problems.push(`talos.${name}: ${(error as Error).message}`);
    }
  }
  return { settings: settings as ServerSettings, problems };
}

/**
 * One setting as VS Code's `inspect()` gives it: each layer's value. In a remote window VS Code
 * also reports the two halves of the user layer (not in the typed API, present since 1.6x):
 * `globalLocalValue`, the User settings of the machine the window runs on, and
 * `globalRemoteValue`, the Remote settings of the machine the extension runs on.
 */
export interface Layers {
  defaultValue?: unknown;
  globalValue?: unknown;
  globalLocalValue?: unknown;
  globalRemoteValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * Settings a repository must not choose for you: where the key is sent (`baseUrl`), which
 * variable is sent as the key, where the store is, what a token costs (a price of 0 would
 * disarm the cost cap), what commands may read outside the workspace and use (`readablePaths`,
 * `limits`) and which program runs. Declared `machine` scope in package.json, so
 * VS Code ignores them in a workspace's `.vscode/settings.json`; read from the user layer here
 * too, so that holds whatever the manifest says.
 */
export const USER_ONLY = new Set(['baseUrl', 'apiKeyEnv', 'storeUrl', 'prices', 'readablePaths', 'limits', 'server.command', 'server.args']);
/** Settings a workspace may only make stricter: the mode, lower, and the caps, smaller. */
const MODE_RANK = new Map<unknown, number>(PERMISSION_MODES.map((m, i) => [m, i]));

function given(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/**
 * The value a setting takes from its layers. A cloned repository's `.vscode/settings.json` is
 * the workspace's content, so it can lower the permission mode and the caps but never raise
 * them, and cannot set the user-only settings at all.
 */
export function effective(name: string, layers: Layers | undefined, remote = false): unknown {
  if (!layers) return undefined;
  if (USER_ONLY.has(name)) return machineValue(layers, remote).value;
  const user = given(layers.globalValue) ? layers.globalValue : layers.defaultValue;
  const workspace = given(layers.workspaceFolderValue) ? layers.workspaceFolderValue : layers.workspaceValue;
  if (!given(workspace)) return user;
  if (name === 'permissionMode') {
    const mine = MODE_RANK.get(user) ?? MODE_RANK.get('ask')!;
    const theirs = MODE_RANK.get(workspace);
    return theirs !== undefined && theirs < mine ? workspace : user;
  }
  if (name === 'maxCost' || name === 'maxSteps') {
    if (typeof workspace !== 'number') return user;
    return typeof user === 'number' ? Math.min(user, workspace) : workspace;
  }
  return workspace;
}

/** Which layer a user-only setting's value comes from in this window. */
export type Source = 'default' | 'user' | 'remote';

export interface MachineValue {
  value: unknown;
  source: Source;
  /** A value in User settings that this remote window does not apply (the default is used). */
  ignored: boolean;
}

/**
 * A machine-scoped (user-only) setting's value where VS Code applies it. In a local window,
 * User settings. In a remote window (Remote-SSH, WSL, Dev Containers, Codespaces, code-server)
 * VS Code applies machine settings from Remote settings only and greys out a User value ("cannot
 * be applied in this window"), so a User value there is ignored and reported, whatever the
 * merged `globalValue` says: an extension host may still see it while the Settings editor tells
 * the person it does not apply. A host that does not report the two halves gives the merged
 * value, which is then taken as applied.
 */
export function machineValue(layers: Layers, remote: boolean): MachineValue {
  if (remote && given(layers.globalRemoteValue)) return { value: layers.globalRemoteValue, source: 'remote', ignored: false };
  if (remote && given(layers.globalLocalValue)) return { value: layers.defaultValue, source: 'default', ignored: true };
  if (given(layers.globalValue)) return { value: layers.globalValue, source: remote ? 'remote' : 'user', ignored: false };
  return { value: layers.defaultValue, source: 'default', ignored: false };
}

/**
 * Settings whose User value, ignored, could send the key or the code elsewhere: without
 * `baseUrl` the task goes to `$OPENAI_BASE_URL` or OpenAI; without `apiKeyEnv` the key of
 * another variable (often an OpenAI key) goes to the endpoint. No task starts while one of
 * these is only in User settings of a remote window.
 */
export const BLOCKING = ['baseUrl', 'apiKeyEnv'];

export interface Ignored {
  /** Every user-only setting with a User value this window does not apply, as `talos.<name>`. */
  names: string[];
  /** Those of them in BLOCKING. */
  blocking: string[];
}

/** The user-only settings this window ignores (`inspect` reads one key's layers). */
export function ignoredSettings(inspect: (key: string) => Layers | undefined, remote: boolean): Ignored {
  const names: string[] = [];
  const blocking: string[] = [];
  if (!remote) return { names, blocking };
  for (const name of USER_ONLY) {
    const layers = inspect(name);
    if (!layers || !machineValue(layers, remote).ignored) continue;
    names.push(`talos.${name}`);
    if (BLOCKING.includes(name)) blocking.push(`talos.${name}`);
  }
  return { names, blocking };
}

function list(names: string[]): string {
  return names.length <= 1 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

/** The button that opens the settings file a remote window reads machine settings from. */
export const OPEN_REMOTE_SETTINGS = 'Open Remote Settings';

/**
 * What the person is told, once, about settings this remote window ignores (`where` names the
 * window, e.g. "SSH: myhost"). With a blocking one, Talos does not start.
 */
export function ignoredMessage(ignored: Ignored, where: string): string {
  const these = ignored.names.length === 1 ? 'is' : 'are';
  const window = `this remote window (${where})`;
  const move = `Put ${ignored.names.length === 1 ? 'it' : 'them'} in your Remote settings (${OPEN_REMOTE_SETTINGS}), where VS Code reads machine settings in a remote window.`;
  if (ignored.blocking.length) {
    return `Talos is not started: ${list(ignored.names)} ${these} only in your User settings, which VS Code does not apply in ${window}, so ${endpointRisk(ignored.blocking)}. ${move} Talos starts once ${list(ignored.blocking)} ${ignored.blocking.length === 1 ? 'is' : 'are'} there.`;
  }
  return `Talos: ${list(ignored.names)} ${these} only in your User settings, which VS Code does not apply in ${window}: the default${ignored.names.length === 1 ? ' is' : 's are'} used. ${move}`;
}

function endpointRisk(blocking: string[]): string {
  const url = blocking.includes('talos.baseUrl');
  const env = blocking.includes('talos.apiKeyEnv');
  if (url && env) return 'your code and a key would go to the default endpoint instead of yours';
  if (url) return 'your code and key would go to the default endpoint ($OPENAI_BASE_URL or OpenAI) instead of yours';
  return 'another variable\'s key ($OPENAI_API_KEY) would be sent instead of yours';
}

/** Why a task is refused while a blocking setting is ignored. */
export function blockedMessage(ignored: Ignored): string {
  return `Talos: no task starts while ${list(ignored.blocking)} ${ignored.blocking.length === 1 ? 'is' : 'are'} only in your User settings, which this remote window does not apply (${endpointRisk(ignored.blocking)}). Put ${ignored.blocking.length === 1 ? 'it' : 'them'} in your Remote settings (${OPEN_REMOTE_SETTINGS}).`;
}
