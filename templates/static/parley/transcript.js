// The transcript, built from the conversation's events in seq order: each person's input, the
// agent's streamed text (Markdown, rendered safely), tool calls as collapsible rows, questions
// where they were asked, steering marked as such, where a turn was resumed, what the agent let
// people know on the way (turn.notice), and how each turn ended (with the tokens it used).

import { formatTime, h, personName } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { QuestionCard } from "./questions.js";

const MAX_SHOWN_JSON = 20000;
// Why a turn was taken over and resumed from its journal (turn.resumed's reason), in words.
const RESUMED_WORDS = {
  process_stopped: "Resumed after its server stopped",
  handed_back: "Resumed after the server restarted",
  question_settled: "Resumed when the question was settled",
  restart: "Resumed after a restart",
};
// A notice's kind (turn.notice's kind) as a sign before its words.
const NOTICE_ICONS = { retry: "↻", limit: "⚠" };
// The page is in English: numbers are grouped as English readers expect ("1,234").
const NUMBER = new Intl.NumberFormat("en");

function shortArguments(args) {
  const values = Object.values(args || {});
  if (values.length === 1 && typeof values[0] === "string") return values[0];
  const text = JSON.stringify(args || {});
  return text === "{}" ? "" : text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

function prettyJson(value) {
  const text = JSON.stringify(value, null, 2) ?? "";
  return text.length > MAX_SHOWN_JSON ? `${text.slice(0, MAX_SHOWN_JSON)}\n…` : text;
}

export class Transcript {
  // terminalTypes: the events that end a turn; endedStatuses: the statuses of an ended turn
  // (both from the page config, so the page never keeps its own copy).
  constructor(root, { me, role, canAct, terminalTypes, endedStatuses, onTurnChange }) {
    this.root = root;
    this.me = me;
    this.role = role;
    this.canAct = canAct;
    this.terminalTypes = new Set(terminalTypes);
    this.endedStatuses = new Set(endedStatuses);
    this.onTurnChange = onTurnChange;
    this.turns = new Map();
    this.questions = new Map();
    this.dirty = new Set();
    this.frame = null;
    this.active = null;
    // False while the page replays history; see goLive.
    this.live = false;
  }

  // The page has caught up with what was stored: from now on questions load what they need
  // (a picker's folder), and failures are announced as they happen.
  goLive() {
    this.live = true;
    for (const card of this.questions.values()) card.activate();
  }

  apply(event) {
    this.scheduleRender();
    const turn = this.turn(event);
    const data = event.data || {};
    switch (event.type) {
      case "turn.started":
        this.started(turn, event);
        break;
      case "message.delta":
        this.openMessage(turn).streamed += data.text;
        this.markDirty(turn.message);
        break;
      case "message.completed":
        this.completeMessage(turn, data.text);
        break;
      case "tool.started":
        this.toolStarted(turn, data);
        break;
      case "tool.completed":
        this.toolCompleted(turn, data);
        break;
      case "selection.requested":
        this.asked(turn, data);
        break;
      case "selection.resolved":
        this.questions.get(data.selection)?.resolve(data);
        this.setStatus(turn, "running");
        break;
      case "turn.steered":
        this.interruptMessage(turn);
        turn.body.append(
          h(
            "div",
            { class: "entry entry-steer" },
            h(
              "header",
              { class: "entry-header" },
              h("span", { class: "who" }, personName(data.by)),
              h("span", { class: "tag tag-steer" }, "steered the turn"),
              h("time", { datetime: event.ts }, formatTime(event.ts)),
            ),
            h("div", { class: "entry-text" }, data.input),
          ),
        );
        break;
      case "turn.resumed":
        this.interruptMessage(turn);
        this.resumed(turn, event);
        break;
      case "turn.notice":
        this.interruptMessage(turn);
        this.notice(turn, event);
        break;
      default:
        if (this.terminalTypes.has(event.type)) this.ended(turn, event);
    }
  }

  turn(event) {
    let turn = this.turns.get(event.turn);
    if (!turn) {
      const body = h("div", { class: "turn-body" });
      const end = h("footer", { class: "turn-end", hidden: true });
      const element = h("article", { class: "turn", dataset: { turn: event.turn } }, body, end);
      turn = {
        id: event.turn,
        element,
        body,
        end,
        status: null,
        // How it ended, in words (without its tokens), once it has.
        ending: "",
        message: null,
        // Text of the agent's current message already shown before a steering entry, a
        // resumed marker or a notice.
        carried: 0,
        tools: new Map(),
      };
      this.turns.set(event.turn, turn);
      document.getElementById("transcript-empty")?.remove();
      this.root.append(element);
    }
    return turn;
  }

  started(turn, event) {
    const { input, started_by: by, interactive } = event.data;
    turn.body.before(
      h(
        "div",
        { class: "entry entry-input" },
        h(
          "header",
          { class: "entry-header" },
          h("span", { class: "who" }, personName(by)),
          h("time", { datetime: event.ts }, formatTime(event.ts)),
          interactive === false ? h("span", { class: "tag" }, "not interactive") : null,
        ),
        h("div", { class: "entry-text" }, input),
      ),
    );
    this.setStatus(turn, "running");
  }

  openMessage(turn) {
    if (!turn.message) {
      const content = h("div", { class: "markdown" });
      const element = h(
        "div",
        { class: "entry entry-agent streaming" },
        h("header", { class: "entry-header" }, h("span", { class: "who who-agent" }, "Agent")),
        content,
      );
      turn.body.append(element);
      turn.message = { element, content, streamed: "", text: null, offset: turn.carried };
    }
    return turn.message;
  }

  completeMessage(turn, text) {
    const message = this.openMessage(turn);
    const own = text.slice(message.offset);
    if (message.streamed !== own && message.streamed !== "") {
      // Never expected: every delta is applied once, in order. Say so, and show the whole text.
      console.warn("parley: repaired a message whose streamed text differed from the stored one", {
        turn: turn.id,
      });
    }
    turn.carried = 0;
    if (own === "" && message.streamed === "") {
      // All of it was shown before a steering entry or a resumed marker.
      message.element.remove();
      turn.message = null;
      return;
    }
    message.text = own;
    this.closeMessage(turn);
  }

  // Steering, the turn being resumed elsewhere, or a notice can come while the agent is
  // mid-message: what was streamed stays above, and the message goes on below in a new entry
  // that shows only what follows (its offset; message.completed carries the whole text, see
  // completeMessage).
  interruptMessage(turn) {
    if (turn.message) turn.carried += turn.message.streamed.length;
    this.closeMessage(turn);
  }

  closeMessage(turn) {
    const message = turn.message;
    if (!message) return;
    turn.message = null;
    message.element.classList.remove("streaming");
    this.markDirty(message);
  }

  markDirty(message) {
    this.dirty.add(message);
    this.scheduleRender();
  }

  // Changes are shown once per frame, however fast the events come: Markdown is rendered then,
  // and the page follows the end of the transcript if the reader was at the end before.
  scheduleRender() {
    if (this.frame === null) {
      this.follow = this.nearBottom();
      this.frame = requestAnimationFrame(() => this.render());
    }
  }

  render() {
    this.frame = null;
    for (const message of this.dirty) {
      message.content.innerHTML = renderMarkdown(message.text ?? message.streamed);
    }
    this.dirty.clear();
    if (this.follow) this.scrollToEnd();
  }

  nearBottom() {
    const page = document.scrollingElement;
    return page.scrollTop + window.innerHeight >= page.scrollHeight - 120;
  }

  scrollToEnd() {
    const page = document.scrollingElement;
    page.scrollTop = page.scrollHeight;
  }

  toolStarted(turn, data) {
    this.closeMessage(turn);
    const state = h("span", { class: "tool-state" }, "running…");
    const detail = h(
      "div",
      { class: "tool-detail" },
      h("p", { class: "tool-label" }, "Arguments"),
      h("pre", {}, prettyJson(data.arguments)),
    );
    const args = shortArguments(data.arguments);
    const element = h(
      "details",
      { class: "tool", dataset: { state: "running", tool: data.name } },
      h(
        "summary",
        {},
        h("span", { class: "tool-name" }, data.name),
        args ? h("code", { class: "tool-args" }, args) : null,
        state,
      ),
      detail,
    );
    turn.body.append(element);
    turn.tools.set(data.id, { element, state, detail });
  }

  toolCompleted(turn, data) {
    let tool = turn.tools.get(data.id);
    if (!tool) {
      this.toolStarted(turn, { id: data.id, name: data.name, arguments: {} });
      tool = turn.tools.get(data.id);
    }
    const failed = "error" in data;
    tool.element.dataset.state = failed ? "failed" : "done";
    tool.state.textContent = failed ? "failed" : "done";
    tool.detail.append(
      h("p", { class: "tool-label" }, failed ? "Error" : "Result"),
      h("pre", {}, failed ? String(data.error) : prettyJson(data.result)),
    );
  }

  asked(turn, selection) {
    this.closeMessage(turn);
    const card = new QuestionCard(selection, { me: this.me, role: this.role, canAct: this.canAct });
    this.questions.set(selection.id, card);
    turn.body.append(card.element);
    if (this.live) card.activate();
    this.setStatus(turn, "awaiting_input");
  }

  // A small marker where another process took the turn over and went on from its journal:
  // nothing said before is repeated, so it only says why there was a seam. The processes are
  // for whoever debugs it, in the tooltip.
  resumed(turn, event) {
    const { reason, process, previous } = event.data || {};
    const by = process ? `Taken over by ${process}${previous ? ` from ${previous}` : ""}` : null;
    turn.body.append(
      h(
        "p",
        { class: "entry-resumed", dataset: { reason: reason || "" }, title: by },
        h("span", { class: "entry-resumed-icon", "aria-hidden": "true" }, "↻"),
        h("span", {}, RESUMED_WORDS[reason] || "Resumed"),
        h("time", { datetime: event.ts }, formatTime(event.ts)),
      ),
    );
  }

  // What the agent lets people know while it works (a retry, a limit reached), as a quiet line
  // where it happened, like the resumed marker; a status, so a screen reader says it too.
  notice(turn, event) {
    const { kind, text } = event.data || {};
    turn.body.append(
      h(
        "p",
        { class: "entry-notice", role: "status", dataset: { kind: kind || "" } },
        h("span", { class: "entry-notice-icon", "aria-hidden": "true" }, NOTICE_ICONS[kind] || "i"),
        h("span", { class: "entry-notice-text" }, text || ""),
        h("time", { datetime: event.ts }, formatTime(event.ts)),
      ),
    );
  }

  ended(turn, event) {
    this.closeMessage(turn);
    const data = event.data || {};
    const words = {
      "turn.completed": ["completed", "Completed"],
      "turn.failed": ["failed", `Failed: ${data.error || "unknown error"}`],
      "turn.cancelled": ["cancelled", data.by ? `Stopped by ${personName(data.by)}` : "Stopped"],
    };
    const [status, text] = words[event.type];
    turn.ending = text;
    turn.end.textContent = text;
    const tokens = this.tokens(data.usage);
    if (tokens) turn.end.append(tokens);
    turn.end.hidden = false;
    turn.end.dataset.status = status;
    if (status === "failed" && this.live) turn.end.setAttribute("role", "alert");
    this.setStatus(turn, status);
  }

  setStatus(turn, status) {
    if (turn.status === status || (this.endedStatuses.has(turn.status) && status === "running")) return;
    turn.status = status;
    turn.element.dataset.status = status;
    const active = this.endedStatuses.has(status) ? null : turn;
    if (active || this.active === turn) {
      this.active = active;
      this.onTurnChange(turn.id, status, turn.ending);
    }
  }

  // The tokens a turn's model used (its terminal event's usage), after how it ended; the split
  // between prompt and completion in the tooltip.
  tokens(usage) {
    if (typeof usage?.total_tokens !== "number") return null;
    const { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total } = usage;
    const split =
      typeof prompt === "number" && typeof completion === "number"
        ? `${NUMBER.format(prompt)} prompt + ${NUMBER.format(completion)} completion tokens`
        : null;
    return h(
      "span",
      { class: "turn-tokens", title: split },
      ` · ${NUMBER.format(total)} ${total === 1 ? "token" : "tokens"}`,
    );
  }

  // Every second: the questions' countdowns.
  tick(now) {
    for (const card of this.questions.values()) card.tick(now);
  }
}
