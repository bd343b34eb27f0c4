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

/** One setting as VS Code's `inspect()` gives it: each layer's value. */
export interface Layers {
  defaultValue?: unknown;
  globalValue?: unknown;
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
export function effective(name: string, layers: Layers | undefined): unknown {
  if (!layers) return undefined;
  const user = given(layers.globalValue) ? layers.globalValue : layers.defaultValue;
  if (USER_ONLY.has(name)) return user;
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
