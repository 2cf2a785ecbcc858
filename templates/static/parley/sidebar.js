// On every signed-in page: the sidebar, the person's conversations across their workspaces by
// latest activity, with a turn running or waiting on a question, and how many messages came
// since they last saw each (stored per person: GET /api/me/conversations/). It reads the list
// again whenever the person's socket says one of theirs changed (people.js turns its
// "activity" frames into `parley:activity` events), and tells the other lists of the page
// (home.js, the conversation's heading) with a `parley:conversations` event. It shows the latest
// 50; "Show more" reads 50 more at a time, up to 200. On a
// conversation's page it marks what the person sees as seen (POST .../seen/), while the tab is
// visible. Wide screens show it beside the page, collapsible, the choice kept in localStorage;
// phones get a drawer behind the header's button.

import { api } from "./api.js";
import { h } from "./dom.js";

const sidebar = document.getElementById("sidebar");
const toggle = document.getElementById("sidebar-toggle");
const closeButton = document.getElementById("sidebar-close");
const list = document.getElementById("sidebar-list");
const status = document.getElementById("sidebar-status");
const PHONE = window.matchMedia("(max-width: 40rem)");
const STORED = "parley.sidebar";
const current = document.querySelector(".conversation-title[data-conversation]")?.dataset.conversation;

// What happened, for people debugging (and the browser tests).
const state = { refreshes: 0, conversations: [], marked: 0, limit: 0 };
window.parleySidebar = state;

// The latest 50, and "Show more" for 50 more at a time, up to the API's 200.
const PAGE = 50;
const MOST = 200;
state.limit = PAGE;
const more = h(
  "button",
  { type: "button", class: "link-button sidebar-status sidebar-more", hidden: true },
  "Show more",
  h("span", { class: "visually-hidden" }, " conversations"),
);
list.after(more);
more.addEventListener("click", async () => {
  const shown = state.conversations.length;
  state.limit = Math.min(MOST, state.limit + PAGE);
  await load();
  list.children[shown]?.querySelector("a")?.focus(); // the first of the new ones
});

// Open and closed. --------------------------------------------------------------------------

function storedOpen() {
  try {
    return localStorage.getItem(STORED) !== "closed";
  } catch {
    return true;
  }
}

function show(open, { remember = false, focus = false } = {}) {
  sidebar.hidden = !open;
  toggle.setAttribute("aria-expanded", String(open));
  document.body.classList.toggle("sidebar-open", open && !PHONE.matches);
  document.body.classList.toggle("sidebar-drawer-open", open && PHONE.matches);
  if (remember && !PHONE.matches) {
    try {
      localStorage.setItem(STORED, open ? "open" : "closed");
    } catch {
      // Private windows may refuse: the choice lasts for this page.
    }
  }
  if (focus) (open ? closeButton : toggle).focus();
}

function layOut() {
  // A phone's drawer starts closed; a wide screen shows what the person chose last.
  show(!PHONE.matches && storedOpen());
}

toggle.addEventListener("click", () => show(sidebar.hidden, { remember: true, focus: true }));
closeButton.addEventListener("click", () => show(false, { remember: true, focus: true }));
sidebar.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && PHONE.matches) show(false, { focus: true });
});
PHONE.addEventListener("change", layOut);

// The list. ---------------------------------------------------------------------------------

function looking(id) {
  return id === current && document.visibilityState === "visible";
}

function item(conversation) {
  const unread = looking(conversation.id) ? 0 : conversation.unread;
  const link = h(
    "a",
    { class: "sidebar-link", href: `/conversations/${encodeURIComponent(conversation.id)}/` },
    h("span", { class: "sidebar-title" }, conversation.title),
    h("span", { class: "sidebar-workspace muted" }, conversation.workspace_name),
  );
  if (conversation.id === current) link.setAttribute("aria-current", "page");
  if (conversation.running) {
    const waiting = conversation.waiting;
    link.append(
      " ",
      h("span", { class: `pill ${waiting ? "pill-awaiting_input" : "pill-running"} sidebar-marker` }, waiting ? "waiting" : "running"),
    );
  }
  if (unread > 0) {
    link.append(
      " ",
      // Counts stop at 100 (the server reads no further): "99+" above 99.
      h("span", { class: "unread-count" }, unread > 99 ? "99+" : String(unread), h("span", { class: "visually-hidden" }, " unread")),
    );
  }
  return h("li", { class: "sidebar-item", "data-conversation": conversation.id, "data-unread": String(unread) }, link);
}

function render(conversations) {
  const focused = document.activeElement?.closest?.(".sidebar-item")?.dataset.conversation;
  list.replaceChildren(...conversations.map(item));
  status.textContent = conversations.length ? "" : "No conversations yet.";
  status.hidden = conversations.length > 0;
  more.hidden = !(conversations.length >= state.limit && state.limit < MOST);
  if (focused) list.querySelector(`[data-conversation="${CSS.escape(focused)}"] a`)?.focus();
}

let loading = null;
let again = false;
let soon = null;

async function load() {
  if (loading) {
    again = true;
    return;
  }
  loading = (async () => {
    do {
      again = false;
      const conversations = await api(`/me/conversations/?limit=${state.limit}`);
      state.refreshes += 1;
      state.conversations = conversations;
      render(conversations);
      window.dispatchEvent(new CustomEvent("parley:conversations", { detail: conversations }));
    } while (again);
  })();
  try {
    await loading;
  } catch {
    status.hidden = false;
    status.textContent = "The conversations could not be loaded.";
  } finally {
    loading = null;
  }
}

// Notices come in bursts (a turn starting stores several messages) and, in a busy workspace,
// without pause: the list is read at most once a second, soon after the first notice and once
// more after the last (a notice never waits more than a second).
const REREAD_EVERY = 1000;
let lastRead = 0;

function loadSoon() {
  if (soon) return; // a read is planned: it will see this change too
  const wait = Math.max(100, lastRead + REREAD_EVERY - Date.now());
  soon = setTimeout(() => {
    soon = null;
    lastRead = Date.now();
    load();
  }, wait);
}

window.addEventListener("parley:activity", loadSoon);

// Seen. -------------------------------------------------------------------------------------
// The newest event the conversation's page has shown, marked seen while the tab is visible;
// at most one call at a time, the latest seq winning. A refusal (4xx: the conversation deleted,
// the person removed, too many calls) stops marking on this page; a server or network failure
// tries again later and later (1 s, 2 s, 4 s... up to a minute).

const MARK_DELAY = 300;
let marking = false;
let markTimer = null;
let asked = 0;
let retryAt = 0;
state.markFailures = 0;
state.markRefused = null;

function shownSeq() {
  return Number(window.parleyStream?.lastSeq ?? document.body.dataset.lastSeq ?? 0) || 0;
}

function failed() {
  state.markFailures += 1;
  retryAt = Date.now() + Math.min(60_000, 1000 * 2 ** (state.markFailures - 1));
}

async function markSeen() {
  markTimer = null;
  const seq = shownSeq();
  if (marking || state.markRefused || document.visibilityState !== "visible" || seq <= state.marked) return;
  marking = true;
  try {
    const mark = await api(`/conversations/${encodeURIComponent(current)}/seen/`, {
      method: "POST",
      body: { seq },
    });
    state.marked = mark.seen_seq;
    asked = seq;
    state.markFailures = 0;
    retryAt = 0;
  } catch (error) {
    // A refusal (4xx) stops marking here; a server's or the network's failure (0) is retried.
    if (error.status >= 400 && error.status < 500) state.markRefused = error.status;
    else failed();
  } finally {
    marking = false;
  }
  // Newer events shown meanwhile (or a failure to try again): not for a seq the server refused
  // to go to, nor after a refusal.
  if (shownSeq() > Math.max(state.marked, retryAt ? 0 : asked)) markSoon();
}

function markSoon() {
  if (state.markRefused || (markTimer && retryAt > Date.now())) return;
  clearTimeout(markTimer);
  markTimer = setTimeout(markSeen, Math.max(MARK_DELAY, retryAt - Date.now()));
}

if (current) {
  new MutationObserver(markSoon).observe(document.body, { attributes: true, attributeFilter: ["data-last-seq"] });
  document.addEventListener("visibilitychange", () => {
    markSoon();
    render(state.conversations);
  });
}

layOut();
toggle.hidden = false;
lastRead = Date.now();
load();
