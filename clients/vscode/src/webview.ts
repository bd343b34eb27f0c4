/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The conversation panel's page script (bundled on its own for the webview: `dist/
 * conversation.js`). It draws what the extension host sends and posts back what the person
 * clicks. Every text from the server or the model goes in as a text node (`textContent`,
 * `createTextNode`, the Markdown tree of `markdown.ts`): nothing is parsed as HTML, no
 * attribute is set from it, no link is made.
 */
import type { PromptRow, ProposalRow, TaskEntry } from './conversation';
import { spent } from './conversation';
import { build, parse, type MiniDocument } from './markdown';
import { visible } from './text';

interface Update {
  type: 'update';
  full: boolean;
  order: string[];
  tasks: TaskEntry[];
  loose: PromptRow[];
  connection: string;
  composer: { follows: string; running: boolean; id: string } | null;
}

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };
const vscode = acquireVsCodeApi();

const log = document.getElementById('log')!;
const loose = document.getElementById('loose')!;
const input = document.getElementById('input') as HTMLTextAreaElement;
const send = document.getElementById('send') as HTMLButtonElement;
const stop = document.getElementById('stop') as HTMLButtonElement;
const fresh = document.getElementById('new') as HTMLButtonElement;
const hint = document.getElementById('hint')!;
const notice = document.getElementById('notice')!;

const sections = new Map<string, { el: HTMLElement; rev: number }>();
/** Step lists the person opened: kept open across redraws. */
const openSteps = new Set<string>();
let latestId: string | undefined;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className = '', text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = visible(text);
  return node;
}

function button(text: string, title: string, onClick: () => void, className = ''): HTMLButtonElement {
  const b = el('button', className, text);
  b.title = visible(title);
  b.addEventListener('click', onClick);
  return b;
}

const STATE_LABEL: Record<string, string> = {
  done: 'Done', failed: 'Failed', cancelled: 'Cancelled', stopped: 'Stopped', interrupted: 'Interrupted',
};

function tokens(n: number): string {
  return n < 1000 ? `${n} tokens` : `${(n / 1000).toFixed(1)}k tokens`;
}

function proposalRowEl(p: ProposalRow): HTMLElement {
  const row = el('div', `proposal status-${/^[a-z_]+$/.test(p.status) ? p.status : 'other'}`);
  row.dataset.proposal = p.id;
  const what = el('div', 'proposal-what');
  what.append(el('span', 'path', p.path), el('span', 'meta', ` · ${p.hunks} change${p.hunks === 1 ? '' : 's'} · ${p.status.replace(/_/g, ' ')}`));
  const actions = el('div', 'actions');
  const act = (action: string): void => vscode.postMessage({ type: 'proposal', action, id: p.id });
  actions.append(button('Diff', `Show the diff of ${p.id}`, () => act('diff'), 'secondary'));
  if (p.status === 'pending' || p.status === 'partly_applied') actions.append(button('Apply', `Apply ${p.id}`, () => act('apply')));
  if (p.status === 'pending' || p.status === 'partly_applied' || p.status === 'stale') actions.append(button('Reject', `Reject ${p.id}`, () => act('reject'), 'secondary'));
  if (p.status === 'applied' || p.status === 'partly_applied') actions.append(button('Undo', `Undo ${p.id}`, () => act('undo'), 'secondary'));
  row.append(what, actions);
  return row;
}

function promptCard(p: PromptRow): HTMLElement {
  const card = el('div', `prompt-card kind-${p.kind === 'permission' ? 'permission' : 'question'}`);
  card.dataset.prompt = p.prompt_id;
  card.setAttribute('role', 'group');
  card.append(el('div', 'prompt-kind', p.kind === 'permission' ? 'Talos asks for permission' : 'Talos asks'));
  card.append(el('div', 'prompt-message', p.message));
  const actions = el('div', 'actions');
  p.actions.forEach((title, index) => {
    const last = index === p.actions.length - 1;
    actions.append(button(title, title, () => {
      for (const b of actions.querySelectorAll('button')) b.disabled = true;
      vscode.postMessage({ type: 'answer', prompt_id: p.prompt_id, index });
    }, last ? 'secondary' : ''));
  });
  card.append(actions);
  return card;
}

function drawTask(t: TaskEntry): HTMLElement {
  const state = t.end ? t.end.state : 'running';
  const section = el('section', `task state-${/^[a-z]+$/.test(state) ? state : 'other'}`);
  section.dataset.task = t.id;

  const you = el('div', 'you');
  you.append(el('div', 'who', t.follows ? 'You (follow-up)' : 'You'), el('div', 'request', t.title || `(task ${t.id})`));
  section.append(you);

  const answer = el('div', 'answer md');
  answer.setAttribute('aria-label', 'Talos');
  if (t.text) build(document as unknown as MiniDocument, answer, parse(t.text));
  else if (!t.end) answer.append(el('p', 'waiting', 'Working…'));
  section.append(answer);

  if (!t.end && t.steps.length) {
    const activity = el('div', 'activity');
    activity.append(el('span', 'spinner'), el('span', '', t.steps[t.steps.length - 1]));
    section.append(activity);
  }
  if (t.steps.length) {
    const details = el('details', 'steps');
    details.open = openSteps.has(t.id);
    details.addEventListener('toggle', () => (details.open ? openSteps.add(t.id) : openSteps.delete(t.id)));
    details.append(el('summary', '', `${t.steps.length} step${t.steps.length === 1 ? '' : 's'}`));
    const list = el('ol');
    for (const step of t.steps) list.append(el('li', '', step));
    details.append(list);
    section.append(details);
  }
  if (t.proposals.length) {
    const proposals = el('div', 'proposals');
    for (const p of t.proposals) proposals.append(proposalRowEl(p));
    section.append(proposals);
  }
  for (const choice of t.answers) section.append(el('div', 'answered', `You answered: ${choice}`));
  for (const p of t.prompts) section.append(promptCard(p));

  const footer = el('div', 'task-end');
  if (t.end) {
    const parts = [STATE_LABEL[t.end.state] ?? t.end.state];
    if (t.end.cost !== null) parts.push(spent(t.end));
    if (t.end.tokens !== null) parts.push(tokens(t.end.tokens));
    footer.append(el('span', 'end-state', parts.join(' · ')));
    if (t.end.error) footer.append(el('div', 'error', t.end.error));
  } else {
    footer.append(el('span', 'end-state', 'Running'));
    footer.append(button('Stop', 'Cancel this task', () => vscode.postMessage({ type: 'task', action: 'cancel', id: t.id }), 'secondary link'));
  }
  footer.append(button('Transcript', 'Open the whole transcript (tools and their output too)', () => vscode.postMessage({ type: 'task', action: 'transcript', id: t.id }), 'secondary link'));
  section.append(footer);
  return section;
}

function atBottom(): boolean {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
}

function update(u: Update): void {
  const follow = atBottom();
  if (u.full) {
    for (const [id, s] of sections) if (!u.order.includes(id)) {
      s.el.remove();
      sections.delete(id);
    }
  }
  for (const t of u.tasks) {
    const known = sections.get(t.id);
    if (known && known.rev >= t.rev && !u.full) continue;
    const drawn = drawTask(t);
    if (known) known.el.replaceWith(drawn);
    sections.set(t.id, { el: drawn, rev: t.rev });
  }
  // in order; a task not drawn yet (none sent) is skipped
  let previous: Element | null = null;
  for (const id of u.order) {
    const s = sections.get(id);
    if (!s) continue;
    const want: Element | null = previous ? previous.nextElementSibling : log.firstElementChild;
    if (want !== s.el) {
      if (previous) previous.after(s.el);
      else log.prepend(s.el);
    }
    previous = s.el;
  }
  if (!u.order.length) {
    log.replaceChildren(el('p', 'empty', u.connection === 'running'
      ? 'Ask Talos to do something: type below. Tasks started elsewhere (the palette, a code action) show here too.'
      : 'The Talos language server is not running (Talos: Restart).'));
  } else {
    log.querySelector(':scope > .empty')?.remove();
  }
  loose.replaceChildren(...u.loose.map(promptCard));

  latestId = u.composer?.id;
  const running = !!u.composer?.running;
  stop.hidden = !running;
  send.disabled = running || u.connection !== 'running';
  hint.textContent = u.connection !== 'running' ? 'The language server is not running.'
    : running ? 'Talos is working on it…'
      : u.composer ? `Follow-up to: ${visible(u.composer.follows.replace(/\s+/g, ' ')).slice(0, 120)}` : 'A new task';
  if (follow) log.scrollTop = log.scrollHeight;
}

function reveal(id: string): void {
  const s = sections.get(id);
  if (!s) return;
  s.el.scrollIntoView({ block: 'start' });
  s.el.classList.add('revealed');
  setTimeout(() => s.el.classList.remove('revealed'), 2000);
}

function submit(): void {
  if (send.disabled) return;
  const text = input.value;
  if (!text.trim()) return;
  notice.textContent = '';
  send.disabled = true;
  vscode.postMessage({ type: 'send', text });
}

send.addEventListener('click', submit);
stop.addEventListener('click', () => latestId && vscode.postMessage({ type: 'task', action: 'cancel', id: latestId }));
fresh.addEventListener('click', () => vscode.postMessage({ type: 'new' }));
input.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});

window.addEventListener('message', (event: MessageEvent) => {
  const m = event.data as { type?: string; text?: string; id?: string };
  if (m?.type === 'update') update(m as Update);
  else if (m?.type === 'sent') {
    input.value = '';
    notice.textContent = '';
  } else if (m?.type === 'notice') {
    notice.textContent = visible(String(m.text ?? ''));
    send.disabled = false;
  } else if (m?.type === 'reveal' && typeof m.id === 'string') reveal(m.id);
});

vscode.postMessage({ type: 'ready' });
