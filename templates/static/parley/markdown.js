// The agent's Markdown, rendered safely: markdown-it (vendored, MIT) with raw HTML turned off, so
// any markup in the text is shown as text; links are checked by markdown-it (no javascript:,
// vbscript: or file: URLs) and open in a new tab without access to this page. Code blocks are
// highlighted by highlight.js (vendored, BSD-3-Clause; ```diff blocks show added and removed
// lines) and each has a Copy button.

// Pages that show no code blocks (the "Waiting for you" page) do not load highlight.js: their
// code blocks, if any, stay plain.
const hljs = window.hljs;

const md = window.markdownit({
  html: false,
  linkify: true,
  breaks: true,
  typographer: false,
  // markdown-it escapes what this returns nothing for; highlight.js escapes the code itself
  // (its output is spans around escaped text), so no markup in the code ever becomes HTML.
  highlight(code, language) {
    if (!hljs || !language || !hljs.getLanguage(language)) return "";
    return hljs.highlight(code, { language, ignoreIllegals: true }).value;
  },
});
const { escapeHtml, unescapeAll } = md.utils;

const renderToken = (tokens, index, options, env, self) => self.renderToken(tokens, index, options);
const linkOpen = md.renderer.rules.link_open || renderToken;
md.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index].attrSet("target", "_blank");
  tokens[index].attrSet("rel", "noopener noreferrer nofollow");
  return linkOpen(tokens, index, options, env, self);
};

// Aligned table cells get a class, not a style attribute (which the page's policy refuses).
for (const rule of ["th_open", "td_open"]) {
  md.renderer.rules[rule] = (tokens, index, options, env, self) => {
    const token = tokens[index];
    const align = /text-align:\s*(left|center|right)/.exec(token.attrGet("style") || "");
    token.attrs = (token.attrs || []).filter(([name]) => name !== "style");
    if (align) token.attrJoin("class", `align-${align[1]}`);
    return renderToken(tokens, index, options, env, self);
  };
}

// A code block: markdown-it's own <pre><code class="language-…">, under a bar with the
// language and a Copy button. The page re-renders a streaming message every frame, so the
// button is plain markup and its clicks are handled once, for the whole document, below.
const fence = md.renderer.rules.fence;
md.renderer.rules.fence = (tokens, index, options, env, self) => {
  const info = unescapeAll(tokens[index].info || "").trim();
  const language = info.split(/\s+/)[0];
  const label = language ? `<span class="code-language">${escapeHtml(language)}</span>` : "";
  return (
    `<div class="code-block"><div class="code-bar">${label}` +
    '<button type="button" class="code-copy">Copy</button></div>' +
    `${fence(tokens, index, options, env, self)}</div>\n`
  );
};

export function renderMarkdown(text) {
  return md.render(text);
}

// One line of Markdown (a question's prompt): code spans, emphasis and links, no blocks.
export function renderInlineMarkdown(text) {
  return md.renderInline(text);
}

// Copying -----------------------------------------------------------------------------------

const COPIED_FOR_MS = 2000;
let announcer = null;

// One polite status line for the whole page, so that a screen reader hears what a click did.
function announce(text) {
  if (!announcer) {
    announcer = document.createElement("p");
    announcer.className = "visually-hidden";
    announcer.setAttribute("role", "status");
    document.body.append(announcer);
  }
  announcer.textContent = "";
  announcer.textContent = text;
}

function showOutcome(button, text) {
  button.textContent = text;
  clearTimeout(button.copyTimer);
  button.copyTimer = setTimeout(() => {
    button.textContent = "Copy";
  }, COPIED_FOR_MS);
}

// Without clipboard access (a page served over plain HTTP from another machine, or the person
// refused it), the code is selected instead, for the keyboard's own copy.
function selectCode(code) {
  const range = document.createRange();
  range.selectNodeContents(code);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

async function copyCode(button) {
  const code = button.closest(".code-block")?.querySelector("pre code");
  if (!code) return;
  // The code as written: markdown-it ends every block with a line break, which is not part of it.
  const text = code.textContent.replace(/\n$/, "");
  try {
    await navigator.clipboard.writeText(text);
    showOutcome(button, "Copied");
    announce("Code copied to the clipboard.");
  } catch {
    selectCode(code);
    showOutcome(button, "Press Ctrl+C");
    announce("Could not copy: the code is selected, press Ctrl+C (⌘C on a Mac) to copy it.");
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest?.(".code-copy");
  if (button) copyCode(button);
});
