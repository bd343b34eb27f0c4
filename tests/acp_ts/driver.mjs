// A real ACP client for the tests: the official TypeScript SDK (@agentclientprotocol/sdk,
// `client(...)` + `ndJsonStream`) driving `talos-ls --acp` over its stdio.
//
// Usage: node driver.mjs SCENARIO.json LOG.json
//
// The scenario (written by tests/acp_ts/*.py) names the agent's command line and environment,
// the client's scripted behaviour (answers to permission requests and elicitations, editor
// buffers that fs/read_text_file serves before the disk) and a list of steps (initialize, new
// or load a session, prompt, wait for an update, cancel, raw requests). The log records every
// message in both directions with its time, each step's result or JSON-RPC error, and every
// schema failure: the SDK validates what the agent sends it (and answers -32602 or drops a
// notification it cannot parse, saying so on console.error); this driver also checks each
// response the agent sends against the schema of its method, and each line on the agent's
// stdout is a JSON object. The test fails on any of them.
//
// SDK location: $ACP_NODE_MODULES (the harness's cache), else ./node_modules beside this file.

import { spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = process.env.ACP_NODE_MODULES || join(here, "node_modules");
const sdkDir = join(modules, "@agentclientprotocol", "sdk");
const acp = await import(pathToFileURL(join(sdkDir, "dist", "v1", "stable", "acp.js")).href);
const zod = await import(pathToFileURL(join(sdkDir, "dist", "v1", "schema", "zod.gen.js")).href);
const SDK_VERSION = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8")).version;

const [scenarioPath, logPath] = process.argv.slice(2);
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
const WAIT_MS = scenario.waitMs ?? 60000; // generous: a stuck agent fails the test, no hang

const t0 = performance.now();
const now = () => Math.round((performance.now() - t0) * 1000) / 1000;
const log = {
  sdk: SDK_VERSION,
  messages: [], // {dir: "in" | "out", at, msg}
  results: {}, // step name -> {result} | {error}
  schemaErrors: [], // what failed the schema: the SDK's own complaints and ours
  stdoutNotJson: [], // lines on the agent's stdout that are not one JSON object
  clientRequests: [], // {method, params, answer, at}
  writes: [], // fs/write_text_file as the editor got them
  unexpected: [], // requests the script had no answer for
  steps: [], // {step, start, end}
  exit: null,
  killed: null,
  driverError: null,
  vars: {},
};

// --------------------------------------------------------------- the SDK's complaints
// The SDK reports a message it could not validate on console.error ("Invalid message",
// "Error handling notification", "Got response to unknown request"): each one fails the test.
const originalError = console.error;
console.error = (...args) => {
  log.schemaErrors.push({ at: now(), source: "sdk", text: args.map(describe).join(" ") });
  originalError(...args);
};
function describe(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

// ------------------------------------------------------------------- schemas we check
const RESPONSE_SCHEMAS = {
  initialize: zod.zInitializeResponse,
  "session/new": zod.zNewSessionResponse,
  "session/load": zod.zLoadSessionResponse,
  "session/prompt": zod.zPromptResponse,
  "session/set_mode": zod.zSetSessionModeResponse,
};
const INCOMING_SCHEMAS = {
  "session/update": zod.zSessionNotification,
  "session/request_permission": zod.zRequestPermissionRequest,
  "fs/read_text_file": zod.zReadTextFileRequest,
  "fs/write_text_file": zod.zWriteTextFileRequest,
  "elicitation/create": zod.zCreateElicitationRequest,
  "elicitation/complete": zod.zCompleteElicitationNotification,
};
const OUTGOING_ANSWER_SCHEMAS = {
  "session/request_permission": zod.zRequestPermissionResponse,
  "fs/read_text_file": zod.zReadTextFileResponse,
  "elicitation/create": zod.zCreateElicitationResponse,
};
const pendingMethods = new Map(); // our request id -> method, to check the agent's response

function check(schema, value, where) {
  if (!schema) return;
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) {
    const issues = JSON.stringify(parsed.error.issues);
    log.schemaErrors.push({ at: now(), source: "driver", where, issues: issues.slice(0, 2000) });
  }
}

function tapIncoming(msg) {
  log.messages.push({ dir: "in", at: now(), msg });
  if (msg && typeof msg === "object" && !Array.isArray(msg)) {
    if (typeof msg.method === "string") {
      const schema = INCOMING_SCHEMAS[msg.method];
      if (schema) check(schema, msg.params, `${msg.method} params`);
      else if (!msg.method.startsWith("_") && msg.method !== "$/cancel_request") {
        log.schemaErrors.push({ at: now(), source: "driver", where: `unknown method ${msg.method}` });
      }
    } else if ("id" in msg && pendingMethods.has(msg.id)) {
      const method = pendingMethods.get(msg.id);
      pendingMethods.delete(msg.id);
      if ("result" in msg) check(RESPONSE_SCHEMAS[method], msg.result, `${method} result`);
    }
  }
  notifyWaiters();
}

function tapOutgoing(msg) {
  log.messages.push({ dir: "out", at: now(), msg });
  if (msg && typeof msg.method === "string" && "id" in msg) pendingMethods.set(msg.id, msg.method);
}

// ------------------------------------------------------------------------ the agent
const agentErr = scenario.stderr ? createWriteStream(scenario.stderr) : "ignore";
const child = spawn(scenario.argv[0], scenario.argv.slice(1), {
  cwd: scenario.cwd || process.cwd(),
  env: scenario.env || process.env,
  stdio: ["pipe", "pipe", agentErr === "ignore" ? "ignore" : "pipe"],
});
if (agentErr !== "ignore") child.stderr.pipe(agentErr);
const exited = new Promise((resolve) => {
  child.on("exit", (code, signal) => {
    log.exit = { code, signal, at: now() };
    resolve();
    notifyWaiters();
  });
});
child.stdin.on("error", () => {}); // EPIPE after the agent died: reported by `exit`

const [forSdk, forCheck] = Readable.toWeb(child.stdout).tee();
// Each line the agent writes must be one JSON object: a log line on stdout breaks clients.
(async () => {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of forCheck) {
    pending += decoder.decode(chunk, { stream: true });
    let cut;
    while ((cut = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, cut).trim();
      pending = pending.slice(cut + 1);
      if (!line) continue;
      try {
        const value = JSON.parse(line);
        if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error();
      } catch {
        log.stdoutNotJson.push(line.slice(0, 500));
      }
    }
  }
})();

const base = acp.ndJsonStream(Writable.toWeb(child.stdin), forSdk);
const tapIn = new TransformStream({
  transform(msg, controller) {
    tapIncoming(msg);
    controller.enqueue(msg);
  },
});
const tapOut = new TransformStream({
  transform(msg, controller) {
    tapOutgoing(msg);
    controller.enqueue(msg);
  },
});
tapOut.readable.pipeTo(base.writable).catch(() => {});
const stream = { readable: base.readable.pipeThrough(tapIn), writable: tapOut.writable };

// ------------------------------------------------------------ the person, scripted
const behaviour = scenario.client || {};
const permissionAnswers = [...(behaviour.permission || [])];
const elicitationAnswers = [...(behaviour.elicitation || [])];
const buffers = new Map(Object.entries(behaviour.buffers || {})); // path -> unsaved text
const held = []; // permission requests held open (answered "cancelled" on session/cancel)

// Each entry of `client.permission`: an answer for the next request (an option kind, "cancelled",
// {optionId} for any id, even one never offered, or {hold: true}: unanswered until
// session/cancel), {setBuffers: {path: text}, then: answer} (the buffers change before the
// answer), or {when, answer}: the answer for the first request whose tool call mentions
// `when` (matched before the plain entries, each used once).
function nextPermissionAnswer(params) {
  const seen = JSON.stringify(params.toolCall ?? {});
  const rule = permissionAnswers.findIndex(
    (a) => a && typeof a === "object" && "when" in a && seen.includes(a.when),
  );
  if (rule >= 0) return permissionAnswers.splice(rule, 1)[0].answer;
  const plain = permissionAnswers.findIndex((a) => !(a && typeof a === "object" && "when" in a));
  return plain >= 0 ? permissionAnswers.splice(plain, 1)[0] : null;
}

function answerPermission(params) {
  let next = nextPermissionAnswer(params);
  if (next && typeof next === "object" && next.setBuffers) {
    // The person types in the editor while the prompt is shown: the buffers change first.
    for (const [path, text] of Object.entries(next.setBuffers)) buffers.set(path, text);
    next = next.then;
  }
  if (next === null) {
    log.unexpected.push({ method: "session/request_permission", at: now() });
    const reject = params.options.find((o) => o.kind === "reject_once");
    return reject
      ? { outcome: { outcome: "selected", optionId: reject.optionId } }
      : { outcome: { outcome: "cancelled" } };
  }
  if (typeof next === "object" && next.hold) {
    return new Promise((resolve) => held.push({ sessionId: params.sessionId, resolve }));
  }
  if (typeof next === "object" && "optionId" in next) {
    return { outcome: { outcome: "selected", optionId: next.optionId } }; // maybe never offered
  }
  if (next === "cancelled") return { outcome: { outcome: "cancelled" } };
  const option = params.options.find((o) => o.kind === next);
  if (!option) {
    log.unexpected.push({ method: "session/request_permission", wanted: next, at: now() });
    return { outcome: { outcome: "cancelled" } };
  }
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

function answerElicitation(params) {
  const next = elicitationAnswers.length ? elicitationAnswers.shift() : null;
  if (next === null) {
    log.unexpected.push({ method: "elicitation/create", at: now() });
    return { action: "cancel" };
  }
  if (next.action !== "accept") return { action: next.action };
  if (next.content) return { action: "accept", content: next.content };
  // Pick the option whose value or title contains `choose`, in the form's first property that
  // offers options; else type `choose` into its first string property.
  const props = params.requestedSchema?.properties || {};
  for (const [name, prop] of Object.entries(props)) {
    const values = [
      ...(prop.enum || []).map((v) => ({ const: v, title: v })),
      ...(prop.oneOf || []),
      ...(prop.items?.enum || []).map((v) => ({ const: v, title: v })),
      ...(prop.items?.anyOf || []),
    ];
    const hit = values.find((o) => `${o.const} ${o.title}`.includes(next.choose));
    if (hit) {
      return { action: "accept", content: { [name]: prop.type === "array" ? [hit.const] : hit.const } };
    }
  }
  const text = Object.entries(props).find(([, p]) => p.type === "string");
  if (text) return { action: "accept", content: { [text[0]]: next.choose } };
  log.unexpected.push({ method: "elicitation/create", wanted: next.choose, at: now() });
  return { action: "cancel" };
}

function readText(params) {
  let text;
  if (buffers.has(params.path)) text = buffers.get(params.path);
  else if (existsSync(params.path)) text = readFileSync(params.path, "utf8");
  else throw acp.RequestError.resourceNotFound(params.path);
  if (params.line != null || params.limit != null) {
    const lines = text.split(/(?<=\n)/);
    const start = Math.max(1, params.line ?? 1) - 1;
    const end = params.limit != null ? start + params.limit : lines.length;
    text = lines.slice(start, end).join("");
  }
  return { content: text };
}

function writeText(params) {
  log.writes.push({ path: params.path, content: params.content, at: now() });
  if (behaviour.refuseWrites) throw acp.RequestError.internalError({ reason: "refused by the test" });
  buffers.set(params.path, params.content);
  if (behaviour.saveWrites !== false) {
    mkdirSync(dirname(params.path), { recursive: true });
    writeFileSync(params.path, params.content);
  }
  return {};
}

function recorded(method, answer) {
  return async ({ params }) => {
    const entry = { method, params, at: now() };
    log.clientRequests.push(entry);
    notifyWaiters();
    try {
      const result = await answer(params);
      entry.answer = result;
      entry.answeredAt = now();
      check(OUTGOING_ANSWER_SCHEMAS[method], result, `our ${method} answer`);
      return result;
    } catch (error) {
      entry.error = { code: error.code, message: error.message };
      throw error;
    } finally {
      notifyWaiters();
    }
  };
}

const app = acp
  .client({ name: "talos-acp-ts-driver" })
  .onRequest(acp.methods.client.session.requestPermission, recorded("session/request_permission", answerPermission))
  .onRequest(acp.methods.client.fs.readTextFile, recorded("fs/read_text_file", readText))
  .onRequest(acp.methods.client.fs.writeTextFile, recorded("fs/write_text_file", writeText))
  .onRequest(acp.methods.client.elicitation.create, recorded("elicitation/create", answerElicitation))
  .onNotification(acp.methods.client.session.update, () => {})
  .onNotification(acp.methods.client.elicitation.complete, () => {});

// --------------------------------------------------------------------- waiting
const waiters = new Set();
function notifyWaiters() {
  for (const w of [...waiters]) {
    if (w.test()) {
      waiters.delete(w);
      w.resolve();
    }
  }
}
function until(test, what, timeout = WAIT_MS) {
  if (test()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const w = { test, resolve };
    waiters.add(w);
    setTimeout(() => {
      if (waiters.delete(w)) reject(new Error(`timed out waiting for ${what}`));
    }, timeout);
    exited.then(() => {
      if (waiters.delete(w)) {
        if (test()) resolve();
        else reject(new Error(`the agent exited while waiting for ${what}`));
      }
    });
  });
}

function updates(sessionId, kind) {
  return log.messages.filter(
    (m) =>
      m.dir === "in" &&
      m.msg.method === "session/update" &&
      (sessionId === undefined || m.msg.params?.sessionId === sessionId) &&
      (kind === undefined || m.msg.params?.update?.sessionUpdate === kind),
  );
}

// ------------------------------------------------------------------------ steps
const vars = log.vars; // name -> value (session ids)
const running = new Map(); // prompt name -> promise
const resolveVar = (value) =>
  typeof value === "string" && value.startsWith("$") ? vars[value.slice(1)] : value;

function errorOf(error) {
  if (error && typeof error === "object" && "code" in error) {
    return { code: error.code, message: error.message, data: error.data };
  }
  return { code: null, message: String(error?.message ?? error) };
}

async function settle(name, promise) {
  try {
    const result = await promise;
    log.results[name] = { result: result ?? null, at: now() };
  } catch (error) {
    log.results[name] = { error: errorOf(error), at: now() };
  }
  return log.results[name];
}

function withTimeout(promise, what, ms = WAIT_MS) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)),
  ]);
}

async function runStep(ctx, step, index) {
  const name = step.name || `${index}:${step.do}`;
  const record = { step: name, do: step.do, start: now() };
  log.steps.push(record);
  switch (step.do) {
    case "initialize":
      await settle(
        name,
        withTimeout(
          ctx.request(acp.methods.agent.initialize, {
            protocolVersion: step.protocolVersion ?? acp.PROTOCOL_VERSION,
            clientCapabilities: step.clientCapabilities ?? {
              fs: { readTextFile: true, writeTextFile: true },
              terminal: false,
              elicitation: { form: {} },
            },
            clientInfo: { name: "talos-acp-ts-driver", version: SDK_VERSION },
          }),
          "initialize",
        ),
      );
      break;
    case "new_session": {
      const got = await settle(
        name,
        withTimeout(
          ctx.request(acp.methods.agent.session.new, { cwd: step.cwd, mcpServers: step.mcpServers ?? [] }),
          "session/new",
        ),
      );
      if (got.result?.sessionId) vars[step.as || name] = got.result.sessionId;
      break;
    }
    case "load_session": {
      const sessionId = resolveVar(step.sessionId);
      const got = await settle(
        name,
        withTimeout(
          ctx.request(acp.methods.agent.session.load, {
            sessionId,
            cwd: step.cwd,
            mcpServers: step.mcpServers ?? [],
          }),
          "session/load",
        ),
      );
      if (!got.error) vars[step.as || name] = sessionId;
      break;
    }
    case "prompt": {
      const sessionId = resolveVar(step.session);
      const blocks = step.blocks ?? [{ type: "text", text: step.text }];
      const promise = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: blocks });
      const settled = settle(name, withTimeout(promise, `the prompt ${name}`));
      running.set(name, settled);
      if (step.wait !== false) await settled;
      break;
    }
    case "await":
      await running.get(step.prompt);
      break;
    case "wait_update": {
      const sessionId = resolveVar(step.session);
      const count = step.count ?? 1;
      await until(
        () => updates(sessionId, step.kind).length >= count,
        `${count} ${step.kind} update(s) in ${sessionId}`,
      );
      break;
    }
    case "wait_request": {
      const count = step.count ?? 1;
      await until(
        () => log.clientRequests.filter((r) => r.method === step.method).length >= count,
        `${count} ${step.method} request(s)`,
      );
      break;
    }
    case "cancel": {
      const sessionId = resolveVar(step.session);
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      // As the protocol requires of a client: pending permission requests answer "cancelled".
      for (const h of held.splice(0)) h.resolve({ outcome: { outcome: "cancelled" } });
      break;
    }
    case "request":
      await settle(
        name,
        withTimeout(ctx.request(step.method, resolveParams(step.params)), step.method),
      );
      break;
    case "notify":
      await ctx.notify(step.method, resolveParams(step.params));
      break;
    case "wait_file": {
      // Something the agent runs says it started (a command writes a file): polled.
      const deadline = performance.now() + WAIT_MS;
      while (!existsSync(step.path)) {
        if (performance.now() > deadline) throw new Error(`timed out waiting for ${step.path}`);
        if (log.exit) throw new Error(`the agent exited while waiting for ${step.path}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      break;
    }
    case "sleep": // only for "nothing happens meanwhile"
      await new Promise((r) => setTimeout(r, step.ms));
      break;
    default:
      throw new Error(`unknown step ${step.do}`);
  }
  record.end = now();
}

function resolveParams(params) {
  if (params === undefined) return undefined;
  return JSON.parse(JSON.stringify(params), (_, v) => resolveVar(v));
}

// ------------------------------------------------------------------------- run
try {
  await app.connectWith(stream, async (ctx) => {
    for (const [i, step] of (scenario.steps || []).entries()) await runStep(ctx, step, i);
    await Promise.all(running.values());
  });
} catch (error) {
  log.driverError = String(error?.stack ?? error);
}
// The client goes away as an editor does: stdin closed; the agent must exit on its own.
child.stdin.end();
const gone = await Promise.race([
  exited.then(() => true),
  new Promise((r) => setTimeout(() => r(false), scenario.exitWaitMs ?? 20000)),
]);
if (!gone) {
  log.killed = "the agent did not exit after its stdin closed: killed by the driver";
  child.kill("SIGKILL");
  await exited.catch(() => {});
}
// The agent's stderr, all of it in its file before this process exits (tests read it).
if (agentErr !== "ignore" && !agentErr.writableFinished) {
  await Promise.race([
    new Promise((resolve) => agentErr.on("finish", resolve)),
    new Promise((resolve) => setTimeout(resolve, 5000)),
  ]);
}
writeFileSync(logPath, JSON.stringify(log, null, 1));
process.exit(0);
