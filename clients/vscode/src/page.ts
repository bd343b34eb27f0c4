/**
 * The conversation webview's page (pure, so its Content-Security-Policy is unit-tested):
 * `default-src 'none'`, styles only from the extension's own files, the one script by a new
 * nonce, no image, font, frame, connection or form. Nothing in it comes from the model or the
 * server; the script draws the rest with text nodes.
 */
import { randomBytes } from 'node:crypto';

/** The webview's page: nothing in it comes from the model; the script draws the rest. */
export function page(cspSource: string, css: string, script: string): string {
  const nonce = randomBytes(18).toString('base64').replace(/[^A-Za-z0-9]/g, '');
  const csp = [
    "default-src 'none'",
    `style-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    "img-src 'none'",
    "font-src 'none'",
    "connect-src 'none'",
    "media-src 'none'",
    "frame-src 'none'",
    "object-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${css}">
<title>Talos</title>
</head>
<body>
<main id="log" aria-live="polite"></main>
<section id="loose" aria-label="Talos asks"></section>
<footer id="composer">
<div id="hint"></div>
<div id="notice" role="alert"></div>
<textarea id="input" rows="3" placeholder="Ask Talos… (Enter to send, Shift+Enter for a new line)" aria-label="Message to Talos"></textarea>
<div id="buttons"><button id="new" class="secondary" title="Put this conversation away; the next message starts a new task">New</button><button id="stop" class="secondary" hidden>Stop</button><button id="send">Send</button></div>
</footer>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
}
