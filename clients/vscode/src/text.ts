/**
 * Text from the server is written by the model or the workspace: hostile. VS Code renders
 * `$(icon)` in labels and status-bar text, and `[text](command:...)` as a clickable link in
 * notifications, so either could make a prompt say something other than what it asks. These
 * helpers keep every character visible and inert.
 */

const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/** Control, bidi and zero-width characters shown as `<U+202E>` rather than obeyed. */
export function visible(text: string): string {
  return text.replace(INVISIBLE, (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}>`);
}

/** One line for a label, a description or a quick-pick row: no icons, at most `max` chars. */
export function label(text: string, max = 120): string {
  const line = visible(String(text).replace(/\r\n|\r|\n|\t/g, ' ')).replace(/\$\(/g, '$\u200b(');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * A message for a notification: line breaks kept, links broken. VS Code turns
 * `[text](https:…|command:…|file:…)` into a link that hides its target; a zero-width space
 * after the parenthesis leaves the text readable and no longer a link.
 */
export function message(text: string): string {
  const kept = String(text).replace(/\r\n|\r/g, '\n').split('\n').map(visible).join('\n');
  return kept.replace(/\]\(/g, '](\u200b');
}

/** A piece of one line inside a notification's message: at most `max` chars, then `message()`. */
export function inline(text: string, max = 300): string {
  const line = String(text).replace(/\r\n|\r|\n|\t/g, ' ');
  return message(line.length > max ? `${line.slice(0, max - 1)}…` : line);
}
