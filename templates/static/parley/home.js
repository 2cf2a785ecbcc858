// The home list, made livelier: each row's Rename (in place), Archive / Unarchive and Delete
// (asked in a dialog), for the people allowed (the server renders only their controls), and
// latest activity kept in words ("5 minutes ago") while the page stays open. Live too: as the
// sidebar reads the person's conversations again (a `parley:conversations` event, see
// sidebar.js), rows take their new titles and running markers, new conversations join the
// first page, and each list re-sorts by latest activity. Reading, search and paging are plain
// links and forms, and work without it.

import { configureApi } from "./api.js";
import {
  DELETED_KEY,
  confirmDelete,
  deleteConversation,
  editTitle,
  renameConversation,
  setArchived,
} from "./conversation-manage.js";
import { h } from "./dom.js";

const home = document.getElementById("home");
configureApi({ csrf: home.dataset.csrf });
const status = document.getElementById("home-status");
const query = new URLSearchParams(window.location.search);
// Which list this is: a row that no longer belongs in it leaves it.
const archivedView = query.get("archived") === "1";
const searching = Boolean((query.get("q") || "").trim());

function say(text, ...extra) {
  status.replaceChildren(text, ...extra);
}

function rowTitle(row) {
  return row.dataset.title;
}

function labelControls(row) {
  const title = rowTitle(row);
  const archived = row.dataset.archived === "true";
  for (const button of row.querySelectorAll(".conversation-actions button")) {
    const action = button.dataset.action;
    const verb = { rename: "Rename", delete: "Delete" }[action] || (archived ? "Unarchive" : "Archive");
    button.textContent = verb;
    button.setAttribute("aria-label", `${verb} ${title}`);
  }
}

// A row taken out of its list, and how to put it back where it was.
function takeOut(row) {
  const list = row.parentElement;
  const next = row.nextElementSibling;
  row.remove();
  const empty = list.children.length === 0 ? h("p", { class: "muted" }, "Nothing left on this page.") : null;
  if (empty) list.after(empty);
  return () => {
    empty?.remove();
    list.insertBefore(row, next && next.parentElement === list ? next : null);
  };
}

function rename(row, button) {
  const link = row.querySelector(".conversation-link");
  const actions = row.querySelector(".conversation-actions");
  actions.hidden = true;
  editTitle({
    shown: link,
    title: rowTitle(row),
    save: (wanted) => renameConversation(row.dataset.conversation, wanted),
    done(result) {
      actions.hidden = false;
      if (result) {
        link.textContent = result.title;
        row.dataset.title = result.title;
        labelControls(row);
        say(`Renamed to “${result.title}”.`);
      }
      button.focus();
    },
  });
}

async function toggleArchived(row, button) {
  const id = row.dataset.conversation;
  const archived = row.dataset.archived !== "true";
  button.disabled = true;
  try {
    await setArchived(id, archived);
  } catch (refusal) {
    say(refusal.message);
    return;
  } finally {
    button.disabled = false;
  }
  row.dataset.archived = String(archived);
  row.querySelector(".pill-archived").hidden = !archived;
  labelControls(row);
  const title = rowTitle(row);
  if (searching && !archivedView) {
    // A search lists both: the row stays, marked.
    say(archived ? `Archived “${title}”.` : `Unarchived “${title}”.`);
    return;
  }
  const putBack = takeOut(row);
  const undo = h("button", { type: "button", class: "link-button" }, "Undo");
  undo.addEventListener("click", async () => {
    undo.disabled = true;
    try {
      await setArchived(id, !archived);
    } catch (refusal) {
      say(refusal.message);
      return;
    }
    row.dataset.archived = String(!archived);
    row.querySelector(".pill-archived").hidden = archived;
    labelControls(row);
    putBack();
    say(`“${title}” is back.`);
    row.querySelector('[data-action="archive"]').focus();
  });
  say(
    archivedView
      ? `Unarchived “${title}”: it is back in the list. `
      : `Archived “${title}”: find it under Archived, or by searching. `,
    undo,
  );
  undo.focus();
}

async function remove(row) {
  const title = rowTitle(row);
  const deleted = await confirmDelete({
    title,
    remove: () => deleteConversation(row.dataset.conversation),
  });
  if (!deleted) return;
  // Focus goes to a neighbour (or the announcement), not to the page's top.
  const neighbour = (row.nextElementSibling || row.previousElementSibling)?.querySelector("a");
  takeOut(row);
  say(`Deleted “${title}”.`);
  (neighbour || status).focus();
}

home.addEventListener("click", (event) => {
  const button = event.target.closest(".conversation-actions button[data-action]");
  if (!button) return;
  const row = button.closest(".conversation-row");
  if (button.dataset.action === "rename") rename(row, button);
  else if (button.dataset.action === "archive") toggleArchived(row, button);
  else if (button.dataset.action === "delete") remove(row);
});

for (const actions of home.querySelectorAll(".conversation-actions")) actions.hidden = false;

// A conversation deleted from its own page, announced here where that page sent the person.
const deletedTitle = sessionStorage.getItem(DELETED_KEY);
if (deletedTitle !== null) {
  sessionStorage.removeItem(DELETED_KEY);
  say(`Deleted “${deletedTitle}”.`);
}

// Latest activity in words, by the server's rules (views.activity_words), kept current.
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const UNITS = [
  ["minute", 60, 60],
  ["hour", 3600, 24],
  ["day", 86400, 30],
];

function activityWords(moment, now) {
  const seconds = (now - moment) / 1000;
  if (seconds < 60) return "just now";
  for (const [unit, size, limit] of UNITS) {
    const count = Math.floor(seconds / size);
    if (count < limit) return `${count} ${unit}${count === 1 ? "" : "s"} ago`;
  }
  const month = MONTHS[moment.getUTCMonth()];
  return `${moment.getUTCDate()} ${month} ${moment.getUTCFullYear()}`;
}

function refreshActivity() {
  const now = Date.now();
  for (const time of home.querySelectorAll("time.conversation-activity")) {
    const moment = new Date(time.dateTime);
    if (!Number.isNaN(moment.getTime())) time.textContent = activityWords(moment, now);
  }
}

setInterval(refreshActivity, 30_000);

// Live. --------------------------------------------------------------------------------------

const pagedOrSearched = searching || archivedView || query.has("page");

function showTurn(row, conversation) {
  for (const pill of row.querySelectorAll(".pill-running, .pill-awaiting_input, .pill-queued")) pill.remove();
  const status = conversation.active_turn_status;
  if (!status) return;
  const words = status === "awaiting_input" ? "waiting for an answer" : "running";
  row.querySelector(".conversation-row-main").append(h("span", { class: `pill pill-${status}` }, words));
}

function newRow(conversation) {
  const time = h("time", { class: "conversation-activity", datetime: conversation.last_activity_at });
  return h(
    "li",
    {
      class: "conversation-row",
      "data-conversation": conversation.id,
      "data-title": conversation.title,
      "data-archived": "false",
    },
    h(
      "div",
      { class: "conversation-row-main" },
      h("a", { class: "conversation-link", href: `/conversations/${encodeURIComponent(conversation.id)}/` }, conversation.title),
      h("span", { class: "pill pill-archived", hidden: true }, "archived"),
    ),
    h("div", { class: "conversation-row-meta muted" }, time),
  );
}

function listOf(workspaceSlug) {
  const section = document.getElementById(`ws-${workspaceSlug}`)?.closest("section");
  if (!section) return null;
  let rows = section.querySelector(".conversation-list");
  if (!rows) {
    rows = h("ul", { class: "conversation-list" });
    const empty = [...section.children].find((child) => child.matches("p.muted"));
    if (empty) empty.replaceWith(rows);
    else section.append(rows);
  }
  return rows;
}

function newestFirst(rows) {
  const sorted = [...rows.children].sort(
    (a, b) => Date.parse(b.querySelector("time")?.dateTime || 0) - Date.parse(a.querySelector("time")?.dateTime || 0),
  );
  if (sorted.some((row, index) => row !== rows.children[index])) rows.append(...sorted);
}

window.addEventListener("parley:conversations", ({ detail: conversations }) => {
  const touched = new Set();
  for (const conversation of conversations) {
    let row = home.querySelector(`.conversation-row[data-conversation="${CSS.escape(conversation.id)}"]`);
    if (!row) {
      if (pagedOrSearched) continue;
      const rows = listOf(conversation.workspace);
      if (!rows) continue;
      row = newRow(conversation);
      rows.append(row);
    }
    if (row.dataset.title !== conversation.title && !row.querySelector(".title-editor")) {
      row.dataset.title = conversation.title;
      row.querySelector(".conversation-link").textContent = conversation.title;
      labelControls(row);
    }
    row.querySelector("time.conversation-activity")?.setAttribute("datetime", conversation.last_activity_at);
    showTurn(row, conversation);
    touched.add(row.parentElement);
  }
  // A search keeps its own order (the server's); the lists re-sort by latest activity.
  if (!searching) for (const rows of touched) newestFirst(rows);
  refreshActivity();
});
