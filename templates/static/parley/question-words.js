// How a question reads: the words for its kind, its countdown and its outcome, the agent's
// Markdown in a prompt or an option, and an answer as people read it.

import { h } from "./dom.js";
import { renderInlineMarkdown } from "./markdown.js";

export const OUTCOME_WORDS = {
  answered: "Answered",
  dismissed: "Dismissed",
  declined: "Declined",
  expired: "Expired",
  cancelled: "Cancelled",
};

// Where an answer was given, when that was outside Parley (a question's answered_via).
export const VIA_WORDS = { link: "from an answer link", slack: "in Slack" };

const KIND_WORDS = {
  path: { file: "Pick a file", folder: "Pick a folder", any: "Pick a file or folder" },
  choice: "Choose",
  text: "Type an answer",
  confirm: "Confirm",
  form: "Fill in the form",
};

export function kindWords(selection) {
  const words = KIND_WORDS[selection.kind];
  return typeof words === "string" ? words : words[selection.mode] || words.file;
}

export function countdownText(seconds) {
  if (seconds <= 0) return "expiring…";
  if (seconds >= 3600) return `expires in ${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  const minutes = Math.floor(seconds / 60);
  const rest = String(Math.floor(seconds % 60)).padStart(2, "0");
  return `expires in ${minutes}:${rest}`;
}

// The agent's words (a prompt, an option's label or description) as inline Markdown, rendered
// safely (see markdown.js). Inside a button a link would be a control in a control: there its
// text stays and the link goes.
export function inlineMarkdown(tag, attributes, text, { links = true } = {}) {
  const element = h(tag, attributes);
  element.innerHTML = renderInlineMarkdown(text || "");
  if (!links) for (const link of element.querySelectorAll("a")) link.replaceWith(...link.childNodes);
  return element;
}

// The same words as plain text (for an outcome line, a legend, the composer).
export function plainText(markdown) {
  return inlineMarkdown("span", {}, markdown).textContent;
}

// A form's field names in the order its question defined them: its `field_order` (the stored
// schema's object may have lost that order, as PostgreSQL's jsonb does), else the schema's.
export function formFieldNames(selection) {
  const names = Object.keys((selection.schema && selection.schema.properties) || {});
  const kept = (selection.field_order || []).filter((name) => names.includes(name));
  return [...kept, ...names.filter((name) => !kept.includes(name))];
}

// How an answer reads to people: option labels for values, field titles for a form's keys.
export function describeAnswer(selection, answer) {
  if (answer === null || answer === undefined) return "";
  switch (selection.kind) {
    case "choice": {
      const labels = new Map(selection.options.map((option) => [option.value, plainText(option.label)]));
      const values = Array.isArray(answer) ? answer : [answer];
      return values.map((value) => labels.get(value) || `“${value}”`).join(", ");
    }
    case "confirm":
      return answer ? "yes" : "no";
    case "text":
      return `“${answer}”`;
    case "form": {
      const properties = (selection.schema && selection.schema.properties) || {};
      const order = formFieldNames(selection).filter((key) => key in answer);
      return [...order, ...Object.keys(answer).filter((key) => !order.includes(key))]
        .map((key) => {
          const title = (properties[key] && properties[key].title) || key;
          const value = answer[key];
          const shown = typeof value === "boolean" ? (value ? "yes" : "no") : String(value);
          return `${title}: ${shown}`;
        })
        .join("; ");
    }
    default:
      return String(answer);
  }
}
