// The "Waiting for you" page: every question the person may answer, everywhere, each with where
// it was asked, what led to it (collapsed) and the same widgets as in its conversation. The list
// follows the person's socket (people.js announces each change as `parley:waiting`) and nothing
// shown ever moves in it: new questions (marked New) take their place in the server's order, or,
// while the pointer is over the list, go at its end; one answered here stays where it was,
// showing its outcome; and while the pointer is over the list, cards keep their height and
// those settled elsewhere wait (marked) to leave until the pointer does.

import { ApiError, api, configureApi } from "./api.js";
import { h, personName } from "./dom.js";
import { forgetSettledQuestionDrafts } from "./drafts.js";
import { renderMarkdown } from "./markdown.js";
import { QuestionCard } from "./questions.js";

const config = JSON.parse(document.getElementById("parley-config").textContent);
configureApi({ csrf: config.csrf, login: config.login_url });

const list = document.getElementById("waiting-list");

// The page's state, all of it in one place.
const page = {
  // Question id -> { element, card }, in the order shown.
  shown: new Map(),
  // The reading of the list under way (see load), and whether another must follow it.
  loading: null,
  again: false,
  // Whether the list has been read once (questions that come later are marked New).
  loaded: false,
  // Cards held in place while the pointer is over the list (their height kept, or their
  // leaving put off), let go when it leaves.
  held: new Set(),
  leaving: new Map(),
};

// Each card's latest laid-out height, for keeping it when its widgets give way to the outcome
// (by then the new height is all a measure would give).
const heights = new WeakMap();
const sizes = new ResizeObserver((entries) => {
  for (const { target, borderBoxSize } of entries) heights.set(target, borderBoxSize[0].blockSize);
});

function pointerOver() {
  return list.matches(":hover");
}

function keepHeight(element) {
  if (!pointerOver() || !heights.has(element)) return;
  element.style.minHeight = `${heights.get(element)}px`;
  page.held.add(element);
}

// Gone from the list: its box goes, and with it the draft typed there (its listeners and its
// stored text: the question no longer waits).
function drop(id, { element, card }) {
  card.draft?.forget();
  sizes.unobserve(element);
  element.remove();
  page.shown.delete(id);
}

function letGo() {
  for (const element of page.held) element.style.minHeight = "";
  page.held.clear();
  for (const [id, shown] of page.leaving) drop(id, shown);
  page.leaving.clear();
  showEmpty();
}

list.addEventListener("pointerleave", letGo);

function where(item, fresh) {
  const conversation = `/conversations/${encodeURIComponent(item.conversation)}/`;
  const badges = [];
  if (item.addressee && item.addressee.id === config.me.id) badges.push(h("span", { class: "tag tag-for-me" }, "For you"));
  else if (item.addressee) badges.push(h("span", { class: "tag" }, `For ${personName(item.addressee)}`));
  if (item.escalated_at) badges.push(h("span", { class: "tag tag-escalated" }, "Escalated"));
  else if (item.reminded_at) badges.push(h("span", { class: "tag tag-reminded" }, "Reminded"));
  if (fresh) badges.push(h("span", { class: "tag tag-new" }, "New"));
  return h(
    "header",
    { class: "waiting-where" },
    h("a", { href: `${conversation}#question-${encodeURIComponent(item.id)}`, class: "waiting-conversation" }, item.conversation_title),
    h("span", { class: "muted" }, item.workspace.name),
    h(
      "span",
      { class: "muted waiting-asker" },
      item.started_by ? `Asked by the agent in ${personName(item.started_by)}’s turn` : "Asked by the agent",
    ),
    ...badges,
  );
}

// What led to the question, collapsed: the input that started its turn, by whom, and what the
// agent said last before asking.
function context(item) {
  const by = item.started_by ? personName(item.started_by) : "Someone";
  return h(
    "details",
    { class: "waiting-context" },
    h("summary", {}, "What led to this"),
    h(
      "dl",
      {},
      h("dt", {}, `${by} asked the agent`),
      h("dd", { class: "waiting-input" }, item.turn_input || "(no text)"),
      h("dt", {}, "The agent’s last words before the question"),
      item.agent_said ? said(item.agent_said) : h("dd", { class: "waiting-said muted" }, "Nothing: it asked straight away."),
    ),
  );
}

// The agent's words are Markdown, like all it says (rendered safely).
function said(text) {
  const element = h("dd", { class: "waiting-said markdown" });
  element.innerHTML = renderMarkdown(text);
  return element;
}

function entry(item, fresh) {
  const element = h("article", { class: "waiting-item", dataset: { selection: item.id } });
  const card = new QuestionCard(item, {
    me: config.me,
    role: item.role,
    canAct: true,
    onResolve: () => keepHeight(element),
  });
  element.append(where(item, fresh), context(item), card.element);
  sizes.observe(element);
  return { element, card };
}

// Settled elsewhere: it leaves, at once or (under the pointer) once the pointer leaves.
function leave(id, shown) {
  if (!pointerOver()) {
    drop(id, shown);
    return;
  }
  keepHeight(shown.element);
  shown.element.classList.add("waiting-left");
  shown.element.inert = true;
  shown.element.append(h("p", { class: "waiting-left-note" }, "No longer waiting: settled elsewhere."));
  page.leaving.set(id, shown);
}

function render(items) {
  const pending = new Set(items.map((item) => item.id));
  // Answered here: kept, with its outcome, until the page is left (the socket's news of it can
  // come before the reply's own response).
  for (const [id, shown] of page.shown) {
    if (!pending.has(id) && shown.card.status === "pending" && !shown.card.replying && !page.leaving.has(id)) {
      leave(id, shown);
    }
  }
  // What is shown never moves. A new question goes where the server's order puts it among
  // them, unless the pointer is over the list: then at its end, below whatever it points at.
  const order = new Map(items.map((item, index) => [item.id, index]));
  for (const item of items) {
    const current = page.shown.get(item.id);
    if (current) {
      current.card.refresh(item);
      continue;
    }
    const added = entry(item, page.loaded);
    page.shown.set(item.id, added);
    const next = pointerOver()
      ? null
      : [...list.children].find((child) => order.get(child.dataset.selection) > order.get(item.id));
    if (next) next.before(added.element);
    else list.append(added.element);
    added.card.activate();
  }
  // The first reading lists every question the person may answer: the drafts of any other
  // (settled while no page of theirs was open) are of no more use.
  if (!page.loaded) forgetSettledQuestionDrafts(config.me, pending);
  page.loaded = true;
  showEmpty();
}

function showEmpty() {
  const empty = document.getElementById("waiting-empty");
  if (page.shown.size === 0) {
    if (!empty) list.append(h("p", { class: "muted", id: "waiting-empty" }, "Nothing waits for you. Questions for you will appear here as agents ask them."));
    else empty.textContent = "Nothing waits for you. Questions for you will appear here as agents ask them.";
  } else {
    empty?.remove();
  }
}

// Read the list again; changes that come while it is read share the next reading.
async function load() {
  if (page.loading) {
    page.again = true;
    return;
  }
  page.loading = (async () => {
    do {
      page.again = false;
      try {
        const data = await api("/waiting/");
        render(data.results);
        list.setAttribute("aria-busy", "false");
        document.body.dataset.waitingLoaded = String(Number(document.body.dataset.waitingLoaded || 0) + 1);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
      }
    } while (page.again);
  })();
  await page.loading;
  page.loading = null;
}

window.addEventListener("parley:waiting", () => load());
setInterval(() => {
  const now = Date.now();
  for (const { card } of page.shown.values()) card.tick(now);
}, 1000);
load();
