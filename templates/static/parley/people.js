// On every page: what waits for the person, kept live over their own socket (/ws/me/). The
// header's "Waiting for you" count and the tab's title ("(2) Parley") follow it; the pages that
// list questions hear of each change as a `parley:waiting` event on window. With the person's
// leave (asked for with a click, never on load), news that concerns them while the tab is
// hidden becomes a browser notification: a question they may answer, one addressed to them, a
// reminder, an escalation, and a turn of theirs that finished. Which of these, the person
// chose in their notification settings (the header carries the choice): none ("off"), only
// what names them ("addressed": questions addressed to them, reminders and escalations naming
// them, their own turns ending), or all of it ("all").

import { forgetAllDrafts } from "./drafts.js";
import { ReconnectingSocket } from "./socket.js";

// Signing out leaves no draft behind in this browser.
document.getElementById("logout-form")?.addEventListener("submit", forgetAllDrafts);

const UNAUTHENTICATED = 4401;

const link = document.getElementById("waiting-link");
const badge = document.getElementById("waiting-count");
const notifyButton = document.getElementById("notify-toggle");
const choice = document.getElementById("site-user")?.dataset.browserNotifications || "all";
// The tab's title without the count (read each time: a page may rename itself).
const COUNTED = /^\(\d+\)\s+/;

const TURN_ENDINGS = { completed: "finished", failed: "failed", cancelled: "was stopped" };

// What happened, for people debugging (and for the browser tests).
const state = {
  count: Number(badge?.textContent) || 0,
  forMe: 0,
  choice,
  heard: [], // every notice the socket brought, shown or not
  notified: [],
  connections: 0,
};
window.parleyPeople = state;

function showCount({ count, for_me: forMe }) {
  state.count = count;
  state.forMe = forMe;
  badge.textContent = String(count);
  badge.hidden = count === 0;
  badge.classList.toggle("waiting-count-for-me", forMe > 0);
  const words = count === 1 ? "1 question waits for you" : `${count} questions wait for you`;
  link.setAttribute("aria-label", count ? `Waiting for you: ${words}` : "Waiting for you: nothing");
  link.title = forMe ? `${words}, ${forMe} addressed to you` : words;
  const title = document.title.replace(COUNTED, "");
  document.title = count ? `(${count}) ${title}` : title;
  window.dispatchEvent(new CustomEvent("parley:waiting", { detail: { count, forMe } }));
}

// Notifications. -----------------------------------------------------------------------------

const canNotify = "Notification" in window;

function showNotifyButton() {
  if (!notifyButton) return;
  notifyButton.hidden = !canNotify || choice === "off" || Notification.permission !== "default";
}

// Whether the person wants this notice in the browser: reminders, escalations and turn endings
// reach only the people they name, so "addressed" leaves out questions asked of anyone.
function wanted(notice) {
  if (choice === "off") return false;
  if (choice === "addressed") return notice.kind !== "asked" || Boolean(notice.addressed);
  return true;
}

notifyButton?.addEventListener("click", async () => {
  await Notification.requestPermission();
  showNotifyButton();
});

function describe(notice) {
  const conversation = `/conversations/${encodeURIComponent(notice.conversation)}/`;
  const at = notice.selection ? `${conversation}#question-${encodeURIComponent(notice.selection)}` : conversation;
  const where = notice.conversation_title ? ` in “${notice.conversation_title}”` : "";
  switch (notice.kind) {
    case "asked":
      return {
        title: notice.addressed ? `A question for you${where}` : `A new question${where}`,
        body: notice.prompt,
        url: at,
        tag: notice.selection,
      };
    case "reminded":
      return { title: `Reminder: a question waits for you${where}`, body: notice.prompt, url: at, tag: notice.selection };
    case "escalated":
      return { title: `Nobody has answered yet${where}`, body: notice.prompt, url: at, tag: notice.selection };
    case "turn_ended":
      return {
        title: `Your turn ${TURN_ENDINGS[notice.status] || "ended"}${where}`,
        body: "Open the conversation to see what the agent did.",
        url: conversation,
        tag: notice.turn,
      };
    default:
      return null;
  }
}

function notify(notice) {
  state.heard.push({ kind: notice.kind, selection: notice.selection || null, turn: notice.turn || null });
  if (!wanted(notice)) return;
  if (!canNotify || Notification.permission !== "granted") return;
  // A person looking at the page sees the news there (the count, the question itself).
  if (document.visibilityState === "visible") return;
  const shown = describe(notice);
  if (!shown) return;
  // The tag makes every tab of the person show one notification per question or turn.
  const notification = new Notification(shown.title, { body: shown.body, tag: shown.tag });
  notification.addEventListener("click", () => {
    window.focus();
    notification.close();
    window.location.assign(shown.url);
  });
  state.notified.push({ kind: notice.kind, title: shown.title, body: shown.body, url: shown.url });
}

// The socket. -------------------------------------------------------------------------------
// Every new socket sends the whole count at once, so waiting out the backoff loses nothing: it
// takes no close code as a cue to hurry, and retries on its timer whatever the network says.

const socket = new ReconnectingSocket({
  path: () => "/ws/me/",
  onFrame(frame) {
    if (frame.type === "waiting") {
      socket.confirm();
      showCount(frame);
      if (!state.joined) {
        // The socket's first count comes once the server has joined it to its workspaces'
        // news: the lists read again what changed before then (since the page read them, or
        // while the socket was away, or in a workspace left meanwhile).
        state.joined = true;
        window.dispatchEvent(new CustomEvent("parley:activity", { detail: { kind: "connected" } }));
      }
    } else if (frame.type === "notice") {
      notify(frame);
    } else if (frame.type === "activity") {
      // A conversation's place in the person's lists changed: the sidebar reads them again.
      window.dispatchEvent(new CustomEvent("parley:activity", { detail: frame }));
    }
  },
  onConnect() {
    state.connections += 1;
    state.joined = false;
  },
  stopOn: [UNAUTHENTICATED], // signed out: the page's next request says so
});

if (link && badge) {
  showNotifyButton();
  socket.start();
}
