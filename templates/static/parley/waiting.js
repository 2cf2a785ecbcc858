// The "Waiting for you" page: every question the person may answer, everywhere, each with where
// it was asked and the same widgets as in its conversation. The list follows the person's socket
// (people.js announces each change as `parley:waiting`): new questions appear in their place,
// and those settled elsewhere leave; one answered here stays, showing its outcome.

import { ApiError, api, configureApi } from "./api.js";
import { h, personName } from "./dom.js";
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
};

function where(item) {
  const conversation = `/conversations/${encodeURIComponent(item.conversation)}/`;
  const badges = [];
  if (item.addressee && item.addressee.id === config.me.id) badges.push(h("span", { class: "tag tag-for-me" }, "For you"));
  else if (item.addressee) badges.push(h("span", { class: "tag" }, `For ${personName(item.addressee)}`));
  if (item.escalated_at) badges.push(h("span", { class: "tag tag-escalated" }, "Escalated"));
  else if (item.reminded_at) badges.push(h("span", { class: "tag tag-reminded" }, "Reminded"));
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

function entry(item) {
  const card = new QuestionCard(item, { me: config.me, role: item.role, canAct: true });
  const element = h("article", { class: "waiting-item", dataset: { selection: item.id } }, where(item), card.element);
  return { element, card };
}

function render(items) {
  const pending = new Set(items.map((item) => item.id));
  // Settled elsewhere: gone. Answered here: kept, with its outcome, until the page is left
  // (the socket's news of it can come before the reply's own response).
  for (const [id, { element, card }] of page.shown) {
    if (!pending.has(id) && card.status === "pending" && !card.replying) {
      element.remove();
      page.shown.delete(id);
    }
  }
  let previous = null;
  for (const item of items) {
    let current = page.shown.get(item.id);
    if (!current) {
      current = entry(item);
      page.shown.set(item.id, current);
      current.card.activate();
    } else {
      current.card.refresh(item);
    }
    // In the server's order, without moving an entry that is already in place.
    const next = previous ? previous.nextElementSibling : list.firstElementChild;
    if (next !== current.element) {
      if (previous) previous.after(current.element);
      else list.prepend(current.element);
    }
    previous = current.element;
  }
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
