// How a tool call's arguments read in its row, one way for every tool (the builtin agent's, a
// model's, an outside agent's `ask`): in the summary, a single text argument as itself
// (`summarize  notes/plan.md`), several as "name: value" pairs, each value in words (a list as
// its items, a yes/no as yes/no) and cut short with an ellipsis; once opened, every argument in
// full, as a list of names and values. Never JSON cut off mid-way.

import { h } from "./dom.js";

// How long one value, and the whole summary, may be before they are cut short.
const SHORT_VALUE = 60;
const SHORT_SUMMARY = 120;
// The most of a result shown (a listing of a large folder is long).
const MAX_SHOWN_JSON = 20000;
// The fields that name an item of a list of objects (an `ask`'s options), in order of preference.
const NAMING_FIELDS = ["label", "title", "name", "path", "value", "id"];

function ellipsis(text, size) {
  return text.length > size ? `${text.slice(0, size - 1).trimEnd()}…` : text;
}

function isPlain(value) {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}

function plainWords(value) {
  if (value === null || value === undefined) return "none";
  if (typeof value === "boolean") return value ? "yes" : "no";
  return String(value);
}

function itemName(item) {
  if (isPlain(item)) return plainWords(item);
  if (typeof item === "object" && !Array.isArray(item)) {
    const field = NAMING_FIELDS.find((name) => isPlain(item[name]) && item[name] !== null);
    if (field) return plainWords(item[field]);
  }
  return null;
}

// A value in words, when it has a short form: a list of nameable items as those names, an object
// as its fields' count. Null for what only its full form shows (see fullValue).
function inWords(value) {
  if (isPlain(value)) return plainWords(value);
  if (Array.isArray(value)) {
    const names = value.map(itemName);
    if (names.every((name) => name !== null)) return names.length ? names.join(", ") : "none";
    return `${value.length} ${value.length === 1 ? "item" : "items"}`;
  }
  const count = Object.keys(value).length;
  return `${count} ${count === 1 ? "field" : "fields"}`;
}

function isEmpty(value) {
  return value === "" || value === null || value === undefined || (Array.isArray(value) && !value.length);
}

// The one line after the tool's name: its arguments that say something (an empty folder, a
// null, an empty list only in the full list); "" when none do.
export function argumentsSummary(args) {
  const entries = Object.entries(args && typeof args === "object" ? args : {}).filter(
    ([, value]) => !isEmpty(value),
  );
  if (!entries.length) return "";
  if (entries.length === 1 && typeof entries[0][1] === "string") {
    return ellipsis(entries[0][1].replace(/\s+/g, " "), SHORT_SUMMARY);
  }
  const pairs = entries.map(
    ([name, value]) => `${name}: ${ellipsis(inWords(value).replace(/\s+/g, " "), SHORT_VALUE)}`,
  );
  return ellipsis(pairs.join(" · "), SHORT_SUMMARY);
}

// A value shown whole: text as it is (lines kept), a list of plain items as a list, anything
// nested as indented JSON (whole: it is the value itself, not a cut of it).
function fullValue(value) {
  if (isPlain(value)) return h("span", { class: "tool-arg-value" }, plainWords(value));
  if (Array.isArray(value) && value.every(isPlain)) {
    return h("ul", { class: "tool-arg-items" }, value.map((item) => h("li", {}, plainWords(item))));
  }
  return h("pre", { class: "tool-arg-value" }, JSON.stringify(value, null, 2));
}

// Every argument, by name, once the row is opened.
export function argumentsList(args) {
  const entries = Object.entries(args && typeof args === "object" ? args : {});
  if (!entries.length) return h("p", { class: "tool-no-args" }, "No arguments.");
  return h(
    "dl",
    { class: "tool-arg-list" },
    entries.map(([name, value]) => [h("dt", {}, name), h("dd", {}, fullValue(value))]),
  );
}

// What the call came to, once it has: its result (indented JSON, cut short only past
// MAX_SHOWN_JSON), or its error.
export function toolOutcome(data) {
  const failed = "error" in data;
  const text = failed ? String(data.error) : (JSON.stringify(data.result, null, 2) ?? "");
  const shown = text.length > MAX_SHOWN_JSON ? `${text.slice(0, MAX_SHOWN_JSON)}\n…` : text;
  return [h("p", { class: "tool-label" }, failed ? "Error" : "Result"), h("pre", {}, shown)];
}
