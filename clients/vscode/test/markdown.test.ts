import assert from 'node:assert/strict';
import { test } from 'node:test';
import { build, MAX_CHARS, parse, TAGS, toHtml, type Block, type Inline, type MiniDocument, type MiniNode, type Tag } from '../src/markdown';

/** A document that records what is built: elements by tag, text only through text nodes. */
class FakeNode implements MiniNode {
  className = '';
  start?: number;
  readonly children: FakeNode[] = [];
  constructor(readonly tag: string | null, readonly text = '') {}
  appendChild(child: MiniNode): unknown {
    this.children.push(child as FakeNode);
    return child;
  }
  get textContent(): string {
    return this.tag === null ? this.text : this.children.map((c) => c.textContent).join('');
  }
  tags(): string[] {
    return [...(this.tag ? [this.tag] : []), ...this.children.flatMap((c) => c.tags())];
  }
}
const fakeDocument: MiniDocument = {
  createElement: (tag: Tag) => {
    assert.ok((TAGS as readonly string[]).includes(tag), `an element outside the safe set: ${tag}`);
    return new FakeNode(tag);
  },
  createTextNode: (text: string) => new FakeNode(null, text),
};

function render(markdown: string): FakeNode {
  const root = new FakeNode('div');
  build(fakeDocument, root, parse(markdown));
  return root;
}

/** Every string in the tree: the text leaves, code, a code block's language. */
function strings(blocks: Block[]): string[] {
  const inl = (nodes: Inline[]): string[] => nodes.flatMap((n) => (n.t === 'text' || n.t === 'code' ? [n.v] : n.t === 'br' ? [] : inl(n.c)));
  return blocks.flatMap((b): string[] => {
    switch (b.t) {
      case 'p': case 'h': return inl(b.c);
      case 'code': return [b.lang, b.v];
      case 'list': return b.items.flatMap(strings);
      case 'quote': return strings(b.c);
      case 'hr': return [];
    }
  });
}

test('paragraphs, line breaks, emphasis, strong, inline code', () => {
  assert.equal(toHtml(parse('Hello *world* and **bold** and `x < y`.\nNext line.\n\nSecond')),
    '<p>Hello <em>world</em> and <strong>bold</strong> and <code>x &lt; y</code>.<br>Next line.</p><p>Second</p>');
  assert.equal(toHtml(parse('_em_ and __strong__ and ***both***')), '<p><em>em</em> and <strong>strong</strong> and <strong>*both</strong>*</p>');
  assert.equal(toHtml(parse('**a `code` inside**')), '<p><strong>a <code>code</code> inside</strong></p>');
});

test('snake_case, lone stars and escapes stay text', () => {
  assert.equal(toHtml(parse('call my_var_name and 2 * 3 * 4')), '<p>call my_var_name and 2 * 3 * 4</p>');
  assert.equal(toHtml(parse('\\*not em\\* and ** spaced **')), '<p>*not em* and ** spaced **</p>');
  assert.equal(toHtml(parse('unclosed `tick and *star')), '<p>unclosed `tick and *star</p>');
  assert.equal(toHtml(parse('``a ` b``')), '<p><code>a ` b</code></p>');
});

test('fenced code keeps its text, indentation and language; unclosed runs to the end (streaming)', () => {
  assert.deepEqual(parse('```python\ndef f():\n    return "<b>"\n```\nafter'), [
    { t: 'code', lang: 'python', v: 'def f():\n    return "<b>"' },
    { t: 'p', c: [{ t: 'text', v: 'after' }] },
  ]);
  assert.deepEqual(parse('Here:\n~~~\nstill *streaming'), [
    { t: 'p', c: [{ t: 'text', v: 'Here:' }] },
    { t: 'code', lang: '', v: 'still *streaming' },
  ]);
});

test('lists: bullets, numbered from their start, nested, with code inside', () => {
  assert.equal(toHtml(parse('- one\n- two *em*\n\n3. three\n4. four')), '<ul><li><p>one</p></li><li><p>two <em>em</em></p></li></ul><ol start="3"><li><p>three</p></li><li><p>four</p></li></ol>');
  assert.equal(toHtml(parse('1. a\n   - nested\n2. b')), '<ol><li><p>a</p><ul><li><p>nested</p></li></ul></li><li><p>b</p></li></ol>');
  assert.equal(toHtml(parse('- item\n  ```\n  code\n  ```')), '<ul><li><p>item</p><pre><code>code</code></pre></li></ul>');
  assert.equal(toHtml(parse('- lazy\ncontinued')), '<ul><li><p>lazy<br>continued</p></li></ul>');
});

test('headings, quotes and rules', () => {
  assert.equal(toHtml(parse('# Title\n## Sub ##\n> quoted *x*\n\n---')), '<h1>Title</h1><h2>Sub</h2><blockquote><p>quoted <em>x</em></p></blockquote><hr>');
  assert.equal(toHtml(parse('#hashtag')), '<p>#hashtag</p>');
});

const HOSTILE = [
  '<script>alert(1)</script>',
  '<img src=x onerror="alert(1)">',
  '[Apply](command:talos.applyProposal?%5B%22p1%22%5D)',
  '[click](javascript:alert(document.cookie))',
  '![tracker](https://evil.example/pixel.png)',
  '<https://evil.example>',
  'https://evil.example/auto',
  '<a href="https://evil.example">link</a>',
  '[ref]: https://evil.example\n[ref]',
  '<details open><summary>x</summary></details>',
  '<style>body{display:none}</style>',
  '`<iframe src=//evil>`',
  '```html\n<script>steal()</script>\n```',
  '┌──────────┐\n│ [ Allow ] │\n└──────────┘',
  'Allow once | Always allow | Deny',
  'abc\u202Egnp.exe\u202C and \u2066hidden\u2069 and zero\u200Bwidth and \u0007bell and \u061C',
  '&lt;script&gt; and &amp;',
  '*<b>bold?</b>*',
  '- <script>x</script>\n- [a](b)',
  '> <iframe>',
  '# <h1>',
];

test('hostile text stays the characters it is: no tag, link, image or attribute is made', () => {
  for (const input of HOSTILE) {
    const blocks = parse(input);
    const root = render(input);
    // only the safe elements (the fake document asserts it) and no link, image, script
    for (const tag of root.tags()) assert.ok(!['a', 'img', 'script', 'iframe', 'style'].includes(tag), `${tag} from ${JSON.stringify(input)}`);
    const html = toHtml(blocks);
    // the text is escaped there, so every tag is one the subset drew, without attributes
    for (const tag of html.match(/<[^>]*>/g) ?? []) assert.match(tag, /^<\/?(p|em|strong|code|pre|ul|ol|li|br|blockquote|hr|h[1-6])>$/, `${tag} from ${JSON.stringify(input)}`);
    // what the person reads is what was sent (less the markup the safe subset draws)
    const shown = root.textContent;
    for (const word of ['script', 'evil.example', 'javascript:', 'command:', 'onerror', 'Allow'].filter((w) => input.includes(w))) {
      assert.ok(shown.includes(word), `${word} is not shown for ${JSON.stringify(input)}: ${JSON.stringify(shown)}`);
    }
  }
});

test('bidi, zero-width and control characters are shown as code points, never obeyed', () => {
  const all = HOSTILE.join('\n\n');
  for (const s of strings(parse(all))) {
    assert.doesNotMatch(s, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/, JSON.stringify(s));
  }
  const shown = render('abc\u202Egnp.exe `\u2066x` \u200B').textContent;
  assert.ok(shown.includes('abc<U+202E>gnp.exe'), shown);
  assert.ok(shown.includes('<U+2066>x'), shown);
  assert.ok(shown.includes('<U+200B>'), shown);
  // in a code block too, where tabs and newlines stay
  assert.deepEqual(parse('```\na\u202Eb\tc\n```'), [{ t: 'code', lang: '', v: 'a<U+202E>b\tc' }]);
});

test('a link keeps its target visible and is never one', () => {
  const root = render('See [the docs](https://evil.example/phish) now');
  assert.equal(root.textContent, 'See [the docs](https://evil.example/phish) now');
  assert.deepEqual(root.tags(), ['div', 'p']);
});

test('a code block language cannot become markup or a class', () => {
  const blocks = parse('```"><script>x</script> extra\ncode\n```');
  assert.equal(blocks[0].t, 'code');
  const root = render('```"><script>x\ncode\n```');
  const wrap = root.children[0];
  assert.equal(wrap.className, 'md-code');
  assert.equal(wrap.children[0].className, 'md-lang');
  assert.equal(wrap.children[0].textContent, '"><script>x');
});

// a quadratic parse of these would take minutes: the timeout catches that, not a slow machine
test('pathological input is bounded: huge text is cut, deep nesting and many delimiters end', { timeout: 60_000 }, () => {
  const big = 'x'.repeat(MAX_CHARS + 1000);
  const blocks = parse(big);
  assert.ok(strings(blocks).join('').length < MAX_CHARS + 200);
  assert.ok(toHtml(blocks).includes('task transcript'));
  parse('*a '.repeat(30_000));
  parse('_'.repeat(50_000));
  parse('`'.repeat(20_000));
  parse('> '.repeat(5_000) + 'deep');
  parse(Array.from({ length: 200 }, (_, i) => `${' '.repeat(i * 2)}- item`).join('\n'));
  parse('**'.repeat(20_000) + 'x');
});

test('empty and odd input', () => {
  assert.deepEqual(parse(''), []);
  assert.deepEqual(parse('\n\n  \n'), []);
  assert.deepEqual(parse('a\r\nb\rc'), [{ t: 'p', c: [{ t: 'text', v: 'a' }, { t: 'br' }, { t: 'text', v: 'b' }, { t: 'br' }, { t: 'text', v: 'c' }] }]);
  assert.deepEqual(parse(undefined as unknown as string), []);
});
