// On every signed-in page: the sidebar, the person's conversations across their workspaces by
// latest activity, with a turn running or waiting on a question, and how many messages came
// since they last saw each (stored per person: GET /api/me/conversations/). It reads the list
// again whenever the person's socket says one of theirs changed (people.js turns its
// "activity" frames into `parley:activity` events), and tells the other lists of the page
// (home.js, the conversation's heading) with a `parley:conversations` event. On a
// conversation's page it marks what the person sees as seen (POST .../seen/), while the tab is
// visible. Wide screens show it beside the page, collapsible, the choice kept in localStorage;
// phones get a drawer behind the header's button.

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
const state = { refreshes: 0, conversations: [], marked: 0 };
window.parleySidebar = state;

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
      h("span", { class: "unread-count" }, String(unread), h("span", { class: "visually-hidden" }, " unread")),
    );
  }
  return h("li", { class: "sidebar-item", "data-conversation": conversation.id, "data-unread": String(unread) }, link);
}

function render(conversations) {
  const focused = document.activeElement?.closest?.(".sidebar-item")?.dataset.conversation;
  list.replaceChildren(...conversations.map(item));
  status.textContent = conversations.length ? "" : "No conversations yet.";
  status.hidden = conversations.length > 0;
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
      const response = await fetch("/api/me/conversations/", {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (!response.ok) {
        status.hidden = false;
        status.textContent = "The conversations could not be loaded.";
        return;
      }
      const conversations = await response.json();
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

// Notices come in bursts (a turn starting stores several messages): one read for each burst.
function loadSoon() {
  clearTimeout(soon);
  soon = setTimeout(load, 150);
}

window.addEventListener("parley:activity", loadSoon);

// Seen. -------------------------------------------------------------------------------------
// The newest event the conversation's page has shown, marked seen while the tab is visible;
// at most one call at a time, the latest seq winning.

let marking = false;
let markTimer = null;

function shownSeq() {
  return Number(window.parleyStream?.lastSeq ?? document.body.dataset.lastSeq ?? 0) || 0;
}

async function markSeen() {
  const seq = shownSeq();
  if (marking || document.visibilityState !== "visible" || seq <= state.marked) return;
  marking = true;
  try {
    const response = await fetch(`/api/conversations/${encodeURIComponent(current)}/seen/`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": sidebar.dataset.csrf },
      body: JSON.stringify({ seq }),
    });
    if (response.ok) state.marked = (await response.json()).seen_seq;
  } finally {
    marking = false;
  }
  if (shownSeq() > state.marked) markSoon();
}

function markSoon() {
  clearTimeout(markTimer);
  markTimer = setTimeout(markSeen, 300);
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
load();
