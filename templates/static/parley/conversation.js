// The conversation page: the transcript from the event log and live events, the composer (start
// a turn, steer the running one, or answer the question the agent waits on), Stop, the
// connection state, where the keyboard focus goes next, and who is here.

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
// Where Stop asks "are you sure?" first: narrow screens and touch, where it is easy to hit.
const CAREFUL_STOP = window.matchMedia("(max-width: 40rem), (pointer: coarse)");
const STOP_CONFIRM_MS = 4000;

// The page's state, all of it in one place: what the functions below read and change.
const page = {
  // The turn that is running now, if any: the composer steers it and Stop stops it.
  activeTurn: null,
  stopping: false,
  // The turn's status and how the last one ended, in words (see showTurnStatus).
  turnWords: "",
  turnState: "",
  // The connection as last shown (see showConnection), and what ticks its seconds.
  connectionState: "connecting",
  retryTicker: null,
  // Until the page is first live, "connecting" is just the page loading, not news.
  wasLive: false,
  // The seq the page must reach to have caught up with what was stored when it (re)connected:
  // until then it is replaying history, which is shown but not announced or acted upon.
  caughtUpAt: Number.POSITIVE_INFINITY,
  // The frame that will mark the last seq applied (see markProgress).
  progressFrame: null,
  // The question for which the person chose to steer instead of answering.
  steerInsteadOf: null,
  // Until when a question the agent asks next takes the focus from the composer (see focusNext).
  followUpUntil: 0,
  // What the composer sends is on its way: another Enter meanwhile does nothing.
  sending: false,
  // Stop tapped once where it asks to be tapped again (see stop).
  stopConfirming: false,
  stopConfirmTimer: null,
  // The earliest turn shown, before which "Show earlier messages" reads (see loadEarlier).
  earliestTurn: null,
  loadingEarlier: false,
};

const turnStatus = document.getElementById("turn-status");
const transcript = new Transcript(document.getElementById("transcript"), {
  me: config.me,
  role: config.role,
  canAct,
  terminalTypes: config.terminal_types,
  endedStatuses: config.ended_statuses,
  onTurnChange(turnId, status, ending) {
    const ended = endedStatuses.has(status);
    page.activeTurn = ended ? null : { id: turnId, status };
    if (ended) page.stopping = false;
    page.turnWords = ended ? ending : TURN_STATUS_WORDS[status] || "";
    page.turnState = status;
    showTurnStatus();
    updateComposer();
  },
  onQuestionsChange: () => {
    updateComposer();
    focusFollowUp();
  },
  onUnseen: showUnseen,
  afterReply: () => focusNext(),
});

// The connection, as a person sees it. -----------------------------------------------------
// It sits in the footer, which stays on screen; while the page is not live, the turn's status
// line says so too, rather than "working" on news it can no longer get.

const connection = document.getElementById("connection");
const connectionText = connection.querySelector(".connection-text");
const retryButton = connection.querySelector(".connection-retry");

function showConnection(state, retryAt) {
  page.connectionState = state;
  if (state === "live") page.wasLive = true;
  connection.dataset.state = state;
  clearInterval(page.retryTicker);
  retryButton.hidden = state !== "reconnecting" && state !== "offline";
  const words = {
    connecting: "Connecting…",
    live: "Live",
    offline: "Offline",
    closed: "Disconnected",
  };
  if (state === "reconnecting") {
    // The seconds tick visibly; a screen reader hears the state once, not every second.
    const seconds = h("span", { "aria-hidden": "true" });
    const show = () => {
      seconds.textContent = ` in ${Math.max(0, Math.ceil((retryAt - Date.now()) / 1000))} s`;
    };
    connectionText.replaceChildren("Reconnecting…", seconds);
    show();
    page.retryTicker = setInterval(show, 1000);
  } else {
    connectionText.textContent = words[state] || state;
  }
  showTurnStatus();
}

function showTurnStatus() {
  const live = page.connectionState === "live" || !page.wasLive;
  let words = page.turnWords;
  if (!live) {
    words = page.activeTurn
      ? "Not live: the agent may still be working. What it does will show here once the page reconnects."
      : "Not live: anything new will show here once the page reconnects.";
  }
  if (turnStatus.textContent !== words) turnStatus.textContent = words;
  turnStatus.dataset.status = page.turnState;
  turnStatus.dataset.live = String(live);
  // How a turn ended is in the transcript already: here it is only said to screen readers.
  turnStatus.classList.toggle("turn-status-ended", live && endedStatuses.has(page.turnState));
}

const stream = new ConversationStream({
  conversationId,
  onReady(ready) {
    page.caughtUpAt = Math.min(page.caughtUpAt, ready.latest_seq);
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
    // Signed out (4401): reloaded, the page goes to sign-in if this browser is signed out, and
    // reconnects at once if it is still signed in under a new session key (its password was
    // just changed here, which retires the key its socket was opened with).
    if (reason === "signed-out") window.location.reload();
    else if (reason === "reset") window.location.reload();
    else {
      // No longer a member: nothing here can be done any more, and nothing more arrives.
      connectionText.textContent = "Your access to this workspace was removed.";
      composer?.querySelectorAll("textarea, button").forEach((control) => {
        control.disabled = true;
      });
      stopButton?.setAttribute("hidden", "");
    }
  },
});
retryButton.addEventListener("click", () => stream.reconnectNow());

function catchUp() {
  if (stream.lastSeq >= page.caughtUpAt && !transcript.live) {
    transcript.goLive();
    openLinkedQuestion();
  }
}

// A link to a question (#question-<id>, from "Waiting for you" or a notification): once the
// page has it, show it and put the focus on it.
function openLinkedQuestion() {
  const match = /^#question-(.+)$/.exec(window.location.hash);
  const card = match && transcript.questions.get(decodeURIComponent(match[1]));
  if (!card) return;
  card.element.scrollIntoView({ block: "center" });
  if (card.canAnswer) card.focusFirstControl();
}

// The last seq applied, on the page (for people debugging, and the browser tests).
function markProgress() {
  if (page.progressFrame === null) {
    page.progressFrame = requestAnimationFrame(() => {
      page.progressFrame = null;
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

// New activity while the person reads further up. ------------------------------------------

const jumpButton = document.getElementById("jump-latest");
const jumpCount = document.getElementById("jump-latest-count");

function showUnseen(count) {
  jumpButton.hidden = count === 0;
  jumpCount.textContent = String(count);
  jumpButton.setAttribute(
    "aria-label",
    `New activity: ${count} new ${count === 1 ? "entry" : "entries"}. Go to the latest.`,
  );
}

jumpButton.addEventListener("click", () => {
  transcript.jumpToEnd();
  // The button is gone: the focus goes where the latest can be answered.
  if (input) input.focus({ preventScroll: true });
  else document.getElementById("main").focus({ preventScroll: true });
});

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
// While a question this person may answer waits, the composer says so. A question that a line
// of text answers (a text question, a choice that takes one's own answer) is answered from it;
// for any other, Enter goes to the question. "Steer instead" makes it steer the turn, for that
// question, as it does while no question waits.

const composer = document.getElementById("composer");
const input = document.getElementById("composer-input");
const sendButton = document.getElementById("composer-send");
const stopButton = document.getElementById("stop");
const composerError = document.getElementById("composer-error");
const composerLabel = document.getElementById("composer-label");
const composerHint = document.getElementById("composer-hint");
const questionNote = document.getElementById("composer-question");
const questionText = document.getElementById("composer-question-text");
const gotoButton = document.getElementById("composer-goto");
const modeButton = document.getElementById("composer-mode");

const MODES = {
  send: {
    button: "Send",
    label: "Message the agent",
    placeholder: () => `Ask the agent something…${hint}`,
    hint: "Enter sends, Shift+Enter starts a new line. While the agent works, what you send steers it, and Esc stops it.",
  },
  steer: {
    button: "Steer",
    label: "Steer the running turn",
    placeholder: () => "Add something the agent should take into account…",
    hint: "Enter steers the turn (the agent reads it at its next step), Shift+Enter starts a new line. Esc stops the agent.",
  },
  answer: {
    button: "Answer",
    label: "Answer the agent's question",
    placeholder: () => "Type your answer…",
    hint: "Enter answers the question, Shift+Enter starts a new line. Esc stops the agent.",
  },
  point: {
    button: "Go to the question",
    label: "Message the agent",
    placeholder: () => "The agent is waiting on the question above…",
    hint: "Enter goes to the question. Esc stops the agent.",
  },
};

function composerState() {
  const card = transcript.latestAnswerable();
  if (card && page.steerInsteadOf !== card.selection.id) return { mode: card.takesText ? "answer" : "point", card };
  return { mode: page.activeTurn || card ? "steer" : "send", card };
}

function setText(element, text) {
  if (element.textContent !== text) element.textContent = text;
}

function updateComposer() {
  if (!composer) return;
  const { mode, card } = composerState();
  const words = MODES[mode];
  composer.dataset.mode = mode;
  setText(sendButton, words.button);
  setText(composerLabel, words.label);
  setText(composerHint, words.hint);
  input.placeholder = words.placeholder();
  // Enter with nothing typed still goes to the question: nothing is required then.
  input.required = mode !== "point";
  questionNote.hidden = !card;
  if (!card) setText(questionText, "");
  if (card) {
    const quoted = `“${card.promptText}”`;
    setText(
      questionText,
      mode === "answer"
        ? `The agent asks you: ${quoted} — Enter sends your answer.`
        : mode === "point"
          ? `The agent is waiting for your answer to ${quoted} above.`
          : `The agent is waiting for an answer above: what you send now steers the turn instead.`,
    );
    gotoButton.hidden = mode === "answer" || (mode === "steer" && card.takesText);
    setText(modeButton, mode === "steer" ? (card.takesText ? "Answer it here instead" : "Answer it instead") : "Steer instead");
    modeButton.hidden = mode === "steer" && !card.takesText;
  }
  stopButton.hidden = page.activeTurn === null;
  stopButton.disabled = page.stopping;
  if (!page.stopConfirming) setText(stopButton, page.stopping ? "Stopping…" : "Stop");
}

function showComposerError(message) {
  composerError.textContent = message;
  composerError.hidden = !message;
}

// After this person settled a question: the next question they may answer, else the composer
// (where a question that takes text is answered). An agent usually asks its next question a
// moment after an answer: if it does so while the focus still waits, untouched, in the empty
// composer, the focus goes on to it.
const FOLLOW_UP_MS = 3000;

function focusNext() {
  const card = transcript.latestAnswerable();
  if (card && !(input && card.takesText) && card.focusFirstControl()) return;
  if (!input) return;
  input.focus();
  page.followUpUntil = Date.now() + FOLLOW_UP_MS;
}

function focusFollowUp() {
  if (!input || Date.now() > page.followUpUntil) return;
  const card = transcript.latestAnswerable();
  if (!card || document.activeElement !== input || input.value !== "") return;
  page.followUpUntil = 0;
  if (!card.takesText) card.focusFirstControl();
}

function goToQuestion() {
  const card = transcript.latestAnswerable();
  if (card && !card.focusFirstControl()) card.element.scrollIntoView({ block: "center" });
}

async function send() {
  const { mode, card } = composerState();
  if (mode === "point") {
    goToQuestion();
    return;
  }
  const text = input.value.trim();
  if (!text) {
    input.focus();
    return;
  }
  if (page.sending) return;
  page.sending = true;
  showComposerError("");
  sendButton.disabled = true;
  input.readOnly = true;
  const path = `/conversations/${encodeURIComponent(conversationId)}`;
  try {
    if (mode === "answer") {
      const outcome = await card.answerWithText(text);
      if (outcome.mine) {
        input.value = "";
        focusNext();
      } else if (outcome.settled) {
        showComposerError("That question was settled a moment ago (see above): your text is still here.");
      } else if (outcome.error) {
        showComposerError(outcome.error);
      }
    } else if (page.activeTurn) {
      await api(`${path}/steer/`, { method: "POST", body: { expected_turn_id: page.activeTurn.id, input: text } });
      input.value = "";
      transcript.jumpToEnd();
    } else {
      await api(`${path}/turns/`, { method: "POST", body: { input: text, interactive: true } });
      input.value = "";
      transcript.jumpToEnd();
    }
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.code === "turn_in_progress") {
      adoptActiveTurn(error.details.turn);
      showComposerError(
        page.activeTurn
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
    page.sending = false;
    sendButton.disabled = false;
    input.readOnly = false;
  }
}

// A turn the server says is active, unless this page has already seen it end.
function adoptActiveTurn(turnId) {
  const known = turnId && transcript.turns.get(turnId);
  const ended = known && endedStatuses.has(known.status);
  page.activeTurn = turnId && !ended ? { id: turnId, status: "running" } : null;
  updateComposer();
}

function endStopConfirm() {
  clearTimeout(page.stopConfirmTimer);
  page.stopConfirming = false;
  updateComposer();
}

// `careful`: a tap on a narrow or touch screen, which asks to be tapped again first.
async function stop({ careful = false } = {}) {
  if (!page.activeTurn || page.stopping) return;
  if (careful && !page.stopConfirming) {
    page.stopConfirming = true;
    stopButton.textContent = "Tap again to stop";
    clearTimeout(page.stopConfirmTimer);
    page.stopConfirmTimer = setTimeout(endStopConfirm, STOP_CONFIRM_MS);
    return;
  }
  clearTimeout(page.stopConfirmTimer);
  page.stopConfirming = false;
  page.stopping = true;
  const hadFocus = document.activeElement === stopButton;
  updateComposer();
  try {
    await api(`/conversations/${encodeURIComponent(conversationId)}/cancel/`, {
      method: "POST",
      body: { turn_id: page.activeTurn.id },
    });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    page.stopping = false;
    updateComposer();
    if (error.code !== "no_active_turn") showComposerError(error.message);
  } finally {
    // The Stop button was disabled (and is about to go): the composer is what comes next.
    const lost = !document.activeElement || document.activeElement === document.body;
    if (hadFocus || lost || document.activeElement === stopButton) input.focus();
  }
}

// Esc stops the running turn, from anywhere on the page except a question (whose fields may
// use it), another text field, or an open dialog.
function stopKey(event) {
  if (event.key !== "Escape" || event.defaultPrevented || event.isComposing || !page.activeTurn) return;
  if (document.querySelector("dialog[open]")) return;
  const target = event.target instanceof Element ? event.target : null;
  if (target && target !== input && target.closest(".question, input, textarea, select, [contenteditable]")) return;
  event.preventDefault();
  stop();
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
  input.addEventListener("input", () => {
    page.followUpUntil = 0;
    showComposerError("");
  });
  gotoButton.addEventListener("click", goToQuestion);
  modeButton.addEventListener("click", () => {
    const { mode, card } = composerState();
    if (!card) return;
    page.steerInsteadOf = mode === "steer" ? null : card.selection.id;
    updateComposer();
    if (composerState().mode === "point") goToQuestion();
    else input.focus();
  });
  stopButton.addEventListener("click", () => stop({ careful: CAREFUL_STOP.matches }));
  document.addEventListener("keydown", stopKey);
  updateComposer();
}

// The footer stays on screen over the end of the page: what the keyboard focuses must not hide
// under it (scroll-padding-bottom, from its height).
const footer = document.getElementById("conversation-footer");
new ResizeObserver(() => {
  document.documentElement.style.setProperty("--conversation-footer", `${footer.offsetHeight}px`);
}).observe(footer);

setInterval(() => transcript.tick(Date.now()), 1000);
// A handle for people debugging a connection in the console (and for the browser tests).
window.parleyStream = stream;

// History, the latest part first. ------------------------------------------------------------
// The page shows the latest turns at once (whole, from the history endpoint), follows live from
// there, and reads earlier turns as the person scrolls up (or presses "Show earlier messages").

const HISTORY = "turns=20&events=600";
const earlier = document.getElementById("transcript-earlier");
const earlierButton = document.getElementById("load-earlier");

function showEarlier(hasEarlier, firstTurn) {
  page.earliestTurn = firstTurn;
  earlier.hidden = !hasEarlier;
}

async function loadLatest() {
  try {
    const latest = await api(`/conversations/${encodeURIComponent(conversationId)}/history/?${HISTORY}`);
    for (const event of latest.events) transcript.apply(event);
    stream.lastSeq = latest.latest_seq;
    markProgress();
    showEarlier(latest.has_earlier, latest.first_turn);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    // The socket replays the whole conversation instead.
  }
  stream.start();
}

async function loadEarlier() {
  if (page.loadingEarlier || earlier.hidden || !page.earliestTurn) return;
  page.loadingEarlier = true;
  earlierButton.disabled = true;
  earlierButton.textContent = "Loading earlier messages…";
  try {
    const before = encodeURIComponent(page.earliestTurn);
    const part = await api(
      `/conversations/${encodeURIComponent(conversationId)}/history/?${HISTORY}&before_turn=${before}`,
    );
    transcript.prependEarlier(part.events);
    // The control leaving (nothing earlier) must not move what the reader looks at either.
    const scroller = document.scrollingElement;
    const height = scroller.scrollHeight;
    showEarlier(part.has_earlier, part.first_turn);
    scroller.scrollTop += scroller.scrollHeight - height;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
  } finally {
    page.loadingEarlier = false;
    earlierButton.disabled = false;
    earlierButton.textContent = "Show earlier messages";
  }
  // Still in view (the earlier part was short): go on.
  if (!earlier.hidden && earlier.getBoundingClientRect().bottom > 0) loadEarlier();
}

earlierButton.addEventListener("click", loadEarlier);
new IntersectionObserver((entries) => {
  if (entries.some((entry) => entry.isIntersecting)) loadEarlier();
}).observe(earlier);

loadLatest();
