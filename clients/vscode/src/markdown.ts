/**
 * Markdown from the model, made safe to show: parsed into a small tree of blocks and inlines
 * (paragraphs, headings shown as bold lines, fenced code, lists, quotes, rules; inline code,
 * emphasis, strong, line breaks) whose every leaf is plain text, then built into the page
 * with `createElement` and `createTextNode` only. Nothing is ever parsed as HTML, and nothing
 * becomes a link, an image or an attribute: `<script>`, `[text](javascript:…)`,
 * `![x](https://…)`, `<https://…>` and raw HTML stay the characters they are. Control, bidi and
 * zero-width characters are shown as `<U+202E>` (`visible`), so text cannot reorder itself or
 * hide. Pure (no `vscode`, no DOM) so it is unit-tested; the webview script calls `build`.
 */
import { visible } from './text';

export type Inline =
  | { t: 'text'; v: string }
  | { t: 'code'; v: string }
  | { t: 'em'; c: Inline[] }
  | { t: 'strong'; c: Inline[] }
  | { t: 'br' };

export type Block =
  | { t: 'p'; c: Inline[] }
  | { t: 'h'; level: number; c: Inline[] }
  | { t: 'code'; lang: string; v: string }
  | { t: 'list'; ordered: boolean; start: number; items: Block[][] }
  | { t: 'quote'; c: Block[] }
  | { t: 'hr' };

/** Beyond this the text is cut (the transcript has all of it). */
export const MAX_CHARS = 200_000;
/** Lists and quotes nested deeper, and emphasis nested deeper, are shown as text. */
const MAX_DEPTH = 8;

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;

/** The blocks of `markdown`, every text already `visible`. */
export function parse(markdown: string): Block[] {
  let text = String(markdown ?? '').replace(/\r\n?/g, '\n');
  let cut = false;
  if (text.length > MAX_CHARS) {
    text = text.slice(0, MAX_CHARS);
    cut = true;
  }
  const blocks = parseBlocks(text.split('\n'), 0);
  if (cut) blocks.push({ t: 'p', c: [{ t: 'em', c: [{ t: 'text', v: '… (cut here: the rest is in the task transcript)' }] }] });
  return blocks;
}

function isBlank(line: string): boolean {
  return /^[ \t]*$/.test(line);
}

/** A line that ends a paragraph by starting a block of its own. */
function startsBlock(line: string): boolean {
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) return true;
  const item = ITEM.exec(line);
  // an ordered list interrupts a paragraph only from 1, and an empty item never does
  return !!item && item[4].trim() !== '' && (/^[-*+]$/.test(item[2]) || /^1[.)]$/.test(item[2]));
}

function parseBlocks(lines: string[], depth: number): Block[] {
  const blocks: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence && !(fence[1][0] === '`' && fence[2].includes('`'))) {
      const marker = fence[1];
      const indent = line.length - line.trimStart().length;
      const body: string[] = [];
      i++;
      // an unclosed fence runs to the end: a code block still streaming in
      while (i < lines.length) {
        const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
        if (close && close[1][0] === marker[0] && close[1].length >= marker.length) {
          i++;
          break;
        }
        body.push(lines[i].replace(new RegExp(`^ {0,${indent}}`), ''));
        i++;
      }
      blocks.push({ t: 'code', lang: visible(fence[2].trim().split(/\s+/)[0] ?? '').slice(0, 40), v: visible(body.join('\n')) });
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      blocks.push({ t: 'h', level: heading[1].length, c: inlines(heading[2] ?? '', depth) });
      i++;
      continue;
    }
    if (RULE.test(line)) {
      blocks.push({ t: 'hr' });
      i++;
      continue;
    }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const body: string[] = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const quoted = QUOTE.exec(lines[i]);
        if (!quoted && startsBlock(lines[i])) break;
        body.push(quoted ? quoted[1] : lines[i]);
        i++;
      }
      blocks.push({ t: 'quote', c: parseBlocks(body, depth + 1) });
      continue;
    }
    const item = ITEM.exec(line);
    if (item && depth < MAX_DEPTH) {
      const [list, next] = parseList(lines, i, depth);
      blocks.push(list);
      i = next;
      continue;
    }
    // a paragraph: up to a blank line or a line that starts another block
    const body = [line];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i])) body.push(lines[i++]);
    blocks.push({ t: 'p', c: inlines(body.map((l) => l.trim()).join('\n'), depth) });
  }
  return blocks;
}

function parseList(lines: string[], start: number, depth: number): [Block, number] {
  const first = ITEM.exec(lines[start])!;
  const ordered = /\d/.test(first[2]);
  const kind = ordered ? first[2].slice(-1) : first[2];
  const items: Block[][] = [];
  let i = start;
  while (i < lines.length) {
    const item = ITEM.exec(lines[i]);
    if (!item || (ordered ? !/\d/.test(item[2]) || item[2].slice(-1) !== kind : item[2] !== kind)) break;
    // the item's content starts after the marker; lines indented that far (or lazy lines of
    // its paragraph) belong to it
    const width = item[1].length + item[2].length + Math.min(Math.max(item[3].length, 1), 4);
    const body = [item[4]];
    i++;
    let blankBefore = false;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        blankBefore = true;
        body.push('');
        i++;
        continue;
      }
      const indent = line.length - line.trimStart().length;
      if (indent >= width) {
        body.push(line.slice(Math.min(width, indent)));
      } else if (!blankBefore && !startsBlock(line) && !ITEM.test(line)) {
        body.push(line.trim()); // a lazy continuation of the item's paragraph
      } else {
        break;
      }
      blankBefore = false;
      i++;
    }
    while (body.length && body[body.length - 1] === '') body.pop();
    items.push(parseBlocks(body, depth + 1));
  }
  const startAt = ordered ? Math.min(Number.parseInt(first[2], 10) || 1, 1_000_000_000) : 1;
  return [{ t: 'list', ordered, start: startAt, items }, i];
}

// ------------------------------------------------------------------------------ inlines
/** One unit of inline text: a character that may delimit emphasis, one that may not (it was
 * escaped), a code span, a line break. */
type Atom = { k: 'ch'; c: string } | { k: 'lit'; c: string } | { k: 'code'; v: string } | { k: 'br' };

const PUNCTUATION = /^[!-/:-@[-`{-~]$/;

function atomize(text: string): Atom[] {
  const atoms: Atom[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '\\' && i + 1 < text.length && PUNCTUATION.test(text[i + 1])) {
      atoms.push({ k: 'lit', c: text[i + 1] });
      i += 2;
      continue;
    }
    if (c === '\\' && text[i + 1] === '\n') {
      atoms.push({ k: 'br' });
      i += 2;
      continue;
    }
    if (c === '\n') {
      atoms.push({ k: 'br' });
      i++;
      continue;
    }
    if (c === '`') {
      let run = 1;
      while (text[i + run] === '`') run++;
      const ticks = '`'.repeat(run);
      // the closing run: exactly as long
      let close = text.indexOf(ticks, i + run);
      while (close !== -1 && (text[close + run] === '`' || text[close - 1] === '`')) {
        let end = close;
        while (text[end] === '`') end++;
        close = text.indexOf(ticks, end);
      }
      if (close === -1) {
        for (let k = 0; k < run; k++) atoms.push({ k: 'lit', c: '`' });
        i += run;
        continue;
      }
      let v = text.slice(i + run, close).replace(/\n/g, ' ');
      if (v.length > 2 && v.startsWith(' ') && v.endsWith(' ') && v.trim()) v = v.slice(1, -1);
      atoms.push({ k: 'code', v });
      i = close + run;
      continue;
    }
    atoms.push({ k: 'ch', c });
    i++;
  }
  return atoms;
}

function inlines(text: string, depth: number): Inline[] {
  return spans(atomize(text), 0, undefined, depth);
}

function isSpace(a: Atom | undefined): boolean {
  return a === undefined || a.k === 'br' || ((a.k === 'ch' || a.k === 'lit') && /\s/.test(a.c));
}

function isWordChar(a: Atom | undefined): boolean {
  return a !== undefined && (a.k === 'ch' || a.k === 'lit') && /[\p{L}\p{N}]/u.test(a.c);
}

function isDelim(atoms: Atom[], at: number, mark: string, n: number): boolean {
  for (let k = 0; k < n; k++) {
    const a = atoms[at + k];
    if (!a || a.k !== 'ch' || a.c !== mark) return false;
  }
  return true;
}

/** Inline nodes of atoms[from, to): emphasis where an opener has its closer, text else. */
function spans(atoms: Atom[], from: number, to: number | undefined, depth: number): Inline[] {
  const end = to ?? atoms.length;
  const out: Inline[] = [];
  let buffer = '';
  const flush = (): void => {
    if (buffer) out.push({ t: 'text', v: visible(buffer) });
    buffer = '';
  };
  // a search for a closer that failed from some position fails from any later one too
  const none = new Map<string, number>();
  const closer = (mark: string, n: number, after: number): number => {
    const key = mark + n;
    const known = none.get(key);
    if (known !== undefined && after >= known) return -1;
    for (let j = after; j + n <= end; j++) {
      // a run of the mark as long as the opener's (or of three), after something but a space
      if (!isDelim(atoms, j, mark, 1) || isDelim(atoms, j - 1, mark, 1) || isSpace(atoms[j - 1])) continue;
      let run = 1;
      while (run < 4 && j + run < end && isDelim(atoms, j + run, mark, 1)) run++;
      if ((run !== n && run !== 3) || j + n > end) continue;
      if (mark === '_' && isWordChar(atoms[j + run])) continue;
      return j;
    }
    none.set(key, after);
    return -1;
  };
  let i = from;
  while (i < end) {
    const a = atoms[i];
    if (a.k === 'code') {
      flush();
      out.push({ t: 'code', v: visible(a.v) });
      i++;
      continue;
    }
    if (a.k === 'br') {
      flush();
      out.push({ t: 'br' });
      i++;
      continue;
    }
    if (a.k === 'ch' && (a.c === '*' || a.c === '_') && depth < MAX_DEPTH) {
      const mark = a.c;
      let run = 0;
      while (i + run < end && isDelim(atoms, i + run, mark, 1)) run++;
      // the run as a whole opens: something but a space follows it (and for `_`, no letter
      // comes before it: snake_case is no emphasis); a run of four or more is text
      const opens = run <= 3 && i + run < end && !isSpace(atoms[i + run]) && !(mark === '_' && isWordChar(atoms[i - 1]));
      let done = false;
      for (const n of !opens ? [] : run >= 2 ? [2, 1] : [1]) {
        const j = closer(mark, n, i + n + 1);
        if (j === -1) continue;
        flush();
        out.push({ t: n === 2 ? 'strong' : 'em', c: spans(atoms, i + n, j, depth + 1) });
        i = j + n;
        done = true;
        break;
      }
      if (!done) {
        buffer += mark.repeat(run);
        i += run;
      }
      continue;
    }
    buffer += a.k === 'ch' || a.k === 'lit' ? a.c : '';
    i++;
  }
  flush();
  return out;
}

// --------------------------------------------------------------------------------- building
/** What `build` needs of a document: nothing that parses HTML or sets an attribute. */
export interface MiniNode {
  appendChild(child: MiniNode): unknown;
}
export interface MiniDocument {
  createElement(tag: Tag): MiniNode & { className: string };
  createTextNode(text: string): MiniNode;
}

/** The only elements the model's text can become. */
export const TAGS = ['p', 'div', 'pre', 'code', 'em', 'strong', 'ul', 'ol', 'li', 'br', 'blockquote', 'hr', 'span'] as const;
export type Tag = (typeof TAGS)[number];

/** `blocks` as nodes of `doc`, appended to `parent`. */
export function build(doc: MiniDocument, parent: MiniNode, blocks: Block[]): void {
  for (const block of blocks) parent.appendChild(buildBlock(doc, block));
}

function element(doc: MiniDocument, tag: Tag, className = ''): MiniNode & { className: string } {
  const node = doc.createElement(tag);
  if (className) node.className = className;
  return node;
}

function buildBlock(doc: MiniDocument, block: Block): MiniNode {
  switch (block.t) {
    case 'p': {
      const p = element(doc, 'p');
      buildInlines(doc, p, block.c);
      return p;
    }
    case 'h': {
      const h = element(doc, 'div', `md-h md-h${Math.min(block.level, 3)}`);
      buildInlines(doc, h, block.c);
      return h;
    }
    case 'code': {
      const wrap = element(doc, 'div', 'md-code');
      if (block.lang) {
        const lang = element(doc, 'span', 'md-lang');
        lang.appendChild(doc.createTextNode(block.lang));
        wrap.appendChild(lang);
      }
      const pre = element(doc, 'pre');
      const code = element(doc, 'code');
      code.appendChild(doc.createTextNode(block.v));
      pre.appendChild(code);
      wrap.appendChild(pre);
      return wrap;
    }
    case 'list': {
      const list = element(doc, block.ordered ? 'ol' : 'ul');
      if (block.ordered && block.start !== 1) (list as unknown as { start: number }).start = block.start;
      for (const item of block.items) {
        const li = element(doc, 'li');
        // a one-paragraph item shows without the paragraph's margins
        if (item.length === 1 && item[0].t === 'p') buildInlines(doc, li, item[0].c);
        else build(doc, li, item);
        list.appendChild(li);
      }
      return list;
    }
    case 'quote': {
      const quote = element(doc, 'blockquote');
      build(doc, quote, block.c);
      return quote;
    }
    case 'hr':
      return element(doc, 'hr');
  }
}

function buildInlines(doc: MiniDocument, parent: MiniNode, nodes: Inline[]): void {
  for (const node of nodes) {
    switch (node.t) {
      case 'text':
        parent.appendChild(doc.createTextNode(node.v));
        break;
      case 'code': {
        const code = element(doc, 'code');
        code.appendChild(doc.createTextNode(node.v));
        parent.appendChild(code);
        break;
      }
      case 'em':
      case 'strong': {
        const el = element(doc, node.t);
        buildInlines(doc, el, node.c);
        parent.appendChild(el);
        break;
      }
      case 'br':
        parent.appendChild(element(doc, 'br'));
        break;
    }
  }
}

/** The blocks as escaped HTML: for tests and logs (the page is built with `build`). */
export function toHtml(blocks: Block[]): string {
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  const inl = (nodes: Inline[]): string => nodes.map((n) => {
    switch (n.t) {
      case 'text': return esc(n.v);
      case 'code': return `<code>${esc(n.v)}</code>`;
      case 'em': return `<em>${inl(n.c)}</em>`;
      case 'strong': return `<strong>${inl(n.c)}</strong>`;
      case 'br': return '<br>';
    }
  }).join('');
  return blocks.map((b): string => {
    switch (b.t) {
      case 'p': return `<p>${inl(b.c)}</p>`;
      case 'h': return `<h${b.level}>${inl(b.c)}</h${b.level}>`;
      case 'code': return `<pre><code>${esc(b.v)}</code></pre>`;
      case 'list': {
        const tag = b.ordered ? 'ol' : 'ul';
        const start = b.ordered && b.start !== 1 ? ` start="${b.start}"` : '';
        return `<${tag}${start}>${b.items.map((item) => `<li>${toHtml(item)}</li>`).join('')}</${tag}>`;
      }
      case 'quote': return `<blockquote>${toHtml(b.c)}</blockquote>`;
      case 'hr': return '<hr>';
    }
  }).join('');
}
