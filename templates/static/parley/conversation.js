// The conversation page: the transcript from the event log and live events, the composer (start
// a turn, or steer the running one), Stop, the connection state and who is here.

import { ApiError, api, configureApi } from "./api.js";
import { h, personName } from "./dom.js";
import { ConversationStream } from "./stream.js";
import { Transcript } from "./transcript.js";

const config = JSON.parse(document.getElementById("parley-config").textContent);
const conversationId = config.conversation;
const canAct = config.can_act;
const hint = config.hint;
const endedStatuses = new Set(config.ended_statuses);
configureApi({ csrf: config.csrf, login: config.login_url });

const TURN_STATUS_WORDS = {
  queued: "Starting…",
  running: "The agent is working…",
  awaiting_input: "The agent is waiting for an answer.",
};

// The turn that is running now, if any: the composer steers it and Stop stops it.
let activeTurn = null;
let stopping = false;

const turnStatus = document.getElementById("turn-status");
const transcript = new Transcript(document.getElementById("transcript"), {
  me: config.me,
  role: config.role,
  canAct,
  terminalTypes: config.terminal_types,
  endedStatuses: config.ended_statuses,
  onTurnChange(turnId, status, ending) {
    const ended = endedStatuses.has(status);
    activeTurn = ended ? null : { id: turnId, status };
    if (ended) stopping = false;
    turnStatus.textContent = ended ? ending : TURN_STATUS_WORDS[status] || "";
    turnStatus.dataset.status = status;
    updateComposer();
  },
});

// The connection, as a person sees it. -----------------------------------------------------

const connection = document.getElementById("connection");
const connectionText = connection.querySelector(".connection-text");
const retryButton = connection.querySelector(".connection-retry");
let retryTicker = null;

function showConnection(state, retryAt) {
  connection.dataset.state = state;
  clearInterval(retryTicker);
  retryButton.hidden = state !== "reconnecting" && state !== "offline";
  const words = {
    connecting: "Connecting…",
    live: "Live",
    offline: "Offline: waiting for the network",
    closed: "Disconnected",
  };
  if (state === "reconnecting") {
    // The seconds tick visibly; a screen reader hears the state once, not every second.
    const seconds = h("span", { "aria-hidden": "true" });
    const show = () => {
      seconds.textContent = ` in ${Math.max(0, Math.ceil((retryAt - Date.now()) / 1000))} s`;
    };
    connectionText.replaceChildren("Connection lost: reconnecting", seconds);
    show();
    retryTicker = setInterval(show, 1000);
  } else {
    connectionText.textContent = words[state] || state;
  }
}

// The seq the page must reach to have caught up with what was stored when it (re)connected:
// until then it is replaying history, which is shown but not announced or acted upon.
let caughtUpAt = Number.POSITIVE_INFINITY;

const stream = new ConversationStream({
  conversationId,
  onReady(ready) {
    caughtUpAt = Math.min(caughtUpAt, ready.latest_seq);
    catchUp();
    if (ready.latest_seq === 0) {
      const empty = document.getElementById("transcript-empty");
      if (empty) {
        empty.textContent = canAct
          ? `Nothing here yet. Ask the agent something below${hint}.`
          : "Nothing here yet.";
      }
    }
    rehydrateQuestions();
  },
  onEvent(event) {
    transcript.apply(event);
    markProgress();
    catchUp();
  },
  onPresence: showPresence,
  onState: showConnection,
  onClosedForGood(reason) {
    if (reason === "signed-out") window.location.assign(config.login_url);
    else if (reason === "reset") window.location.reload();
    else connectionText.textContent = "You no longer have access to this conversation.";
  },
});
retryButton.addEventListener("click", () => stream.reconnectNow());

function catchUp() {
  if (stream.lastSeq >= caughtUpAt && !transcript.live) transcript.goLive();
}

// The last seq applied, on the page (for people debugging, and the browser tests).
let progressFrame = null;
function markProgress() {
  if (progressFrame === null) {
    progressFrame = requestAnimationFrame(() => {
      progressFrame = null;
      document.body.dataset.lastSeq = String(stream.lastSeq);
    });
  }
}

// After any (re)connect: refresh what the page knows of questions still waiting (their expiry);
// anything settled meanwhile arrives as events in the replay.
async function rehydrateQuestions() {
  try {
    const state = await api(`/conversations/${encodeURIComponent(conversationId)}/in-flight/`);
    for (const selection of state.pending_selections) {
      transcript.questions.get(selection.id)?.refresh(selection);
    }
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
  }
}

// Who is here. ------------------------------------------------------------------------------

const presenceList = document.getElementById("presence");
function showPresence(people) {
  presenceList.replaceChildren(
    ...people.map((person) =>
      h(
        "li",
        { class: "presence-person", title: `${personName(person)} (${person.role || "member"})` },
        h("span", { class: "avatar", "aria-hidden": "true" }, personName(person).slice(0, 1).toUpperCase()),
        h("span", { class: "presence-name" }, person.id === config.me.id ? `${personName(person)} (you)` : personName(person)),
      ),
    ),
  );
}

// The composer and Stop. --------------------------------------------------------------------

const composer = document.getElementById("composer");
const input = document.getElementById("composer-input");
const sendButton = document.getElementById("composer-send");
const stopButton = document.getElementById("stop");
const composerError = document.getElementById("composer-error");
const composerLabel = document.getElementById("composer-label");

function updateComposer() {
  if (!composer) return;
  const steering = activeTurn !== null;
  sendButton.textContent = steering ? "Steer" : "Send";
  composerLabel.textContent = steering ? "Steer the running turn" : "Message the agent";
  input.placeholder = steering
    ? "Add something the agent should take into account…"
    : `Ask the agent something…${hint}`;
  stopButton.hidden = !steering;
  stopButton.disabled = stopping;
  stopButton.textContent = stopping ? "Stopping…" : "Stop";
}

function showComposerError(message) {
  composerError.textContent = message;
  composerError.hidden = !message;
}

let sending = false;

async function send() {
  const text = input.value.trim();
  if (!text) {
    input.focus();
    return;
  }
  if (sending) return;
  sending = true;
  showComposerError("");
  sendButton.disabled = true;
  input.readOnly = true;
  const path = `/conversations/${encodeURIComponent(conversationId)}`;
  try {
    if (activeTurn) {
      await api(`${path}/steer/`, { method: "POST", body: { expected_turn_id: activeTurn.id, input: text } });
    } else {
      await api(`${path}/turns/`, { method: "POST", body: { input: text, interactive: true } });
    }
    input.value = "";
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.code === "turn_in_progress") {
      adoptActiveTurn(error.details.turn);
      showComposerError(
        activeTurn
          ? "Someone started a turn a moment ago. Press Steer to add your message to it."
          : "A turn was running a moment ago. Press Send again.",
      );
    } else if (error.code === "no_active_turn") {
      adoptActiveTurn(null);
      showComposerError("That turn has just ended. Press Send to start a new one.");
    } else if (error.code === "turn_mismatch") {
      adoptActiveTurn(error.details.turn);
      showComposerError("Another turn is running now. Press Steer to add your message to it.");
    } else {
      showComposerError(error.message);
    }
  } finally {
    sending = false;
    sendButton.disabled = false;
    input.readOnly = false;
  }
}

// A turn the server says is active, unless this page has already seen it end.
function adoptActiveTurn(turnId) {
  const known = turnId && transcript.turns.get(turnId);
  const ended = known && endedStatuses.has(known.status);
  activeTurn = turnId && !ended ? { id: turnId, status: "running" } : null;
  updateComposer();
}

async function stop() {
  if (!activeTurn) return;
  stopping = true;
  updateComposer();
  try {
    await api(`/conversations/${encodeURIComponent(conversationId)}/cancel/`, {
      method: "POST",
      body: { turn_id: activeTurn.id },
    });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    stopping = false;
    updateComposer();
    if (error.code !== "no_active_turn") showComposerError(error.message);
  }
}

if (composer) {
  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (event.repeat) return;
      composer.requestSubmit();
    }
  });
  stopButton.addEventListener("click", stop);
  updateComposer();
}

setInterval(() => transcript.tick(Date.now()), 1000);
// A handle for people debugging a connection in the console (and for the browser tests).
window.parleyStream = stream;
stream.start();
