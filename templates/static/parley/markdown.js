// The agent's Markdown, rendered safely: markdown-it (vendored, MIT) with raw HTML turned off, so
// any markup in the text is shown as text; links are checked by markdown-it (no javascript:,
// vbscript: or file: URLs) and open in a new tab without access to this page.

const md = window.markdownit({ html: false, linkify: true, breaks: true, typographer: false });

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

export function renderMarkdown(text) {
  return md.render(text);
}

// One line of Markdown (a question's prompt): code spans, emphasis and links, no blocks.
export function renderInlineMarkdown(text) {
  return md.renderInline(text);
}
