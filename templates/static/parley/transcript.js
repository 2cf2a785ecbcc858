// The transcript, built from the conversation's events in seq order: each person's input, the
// agent's streamed text (Markdown, rendered safely), tool calls as collapsible rows, questions
// where they were asked, steering marked as such, where a turn was resumed, what the agent let
// people know on the way (turn.notice), and how each turn ended (with the tokens it used). Every
// entry has its time, and a separator names the day wherever the day changes. When new entries
// arrive while the reader is further up, they are counted (onUnseen) instead of followed.

import { dayKey, dayLabel, h, personName, refreshTimes, timeElement } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { QuestionCard } from "./questions.js";
import { argumentsList, argumentsSummary, toolOutcome } from "./tool-rows.js";

// Why a turn was taken over and resumed from its journal (turn.resumed's reason), in words.
const RESUMED_WORDS = {
  process_stopped: "Resumed after its server stopped",
  handed_back: "Resumed after the server restarted",
  restart: "Resumed after a restart",
};
// A turn that left memory while its question waited, carried on once the question was settled:
// said as what happened to the question (the turn's latest selection.resolved).
const SETTLED_WORDS = {
  answered: (by) => (by ? `${by} answered` : "the answer"),
  dismissed: (by) => (by ? `${by} dismissed the question` : "the question was dismissed"),
  declined: (by) => (by ? `${by} declined` : "the question was declined"),
  expired: () => "the question expired",
  cancelled: () => "the question was cancelled",
};

function resumedWords(reason, settled) {
  if (reason !== "question_settled") return RESUMED_WORDS[reason] || "Resumed";
  const words = settled && SETTLED_WORDS[settled.status];
  if (!words) return "Carried on";
  return `Carried on after ${words(settled.answered_by ? personName(settled.answered_by) : null)}`;
}
// A notice's kind (turn.notice's kind) as the icon before its words (see .icon-* in parley.css:
// drawn, so that no emoji font is needed).
const NOTICE_ICONS = { retry: "retry", limit: "warning" };
// The page is in English: numbers are grouped as English readers expect ("1,234").
const NUMBER = new Intl.NumberFormat("en");
// How near the end (in pixels) still counts as reading the latest.
const NEAR_END = 120;
// Entry times are brought up to date this often (they say minutes at the finest).
const TIMES_EVERY_MS = 15000;

function outsideAgentEntry(event) {
  const { started_by: by, client } = event.data;
  const agent = client ? `outside agent (${client})` : "outside agent";
  return h(
    "p",
    { class: "entry-notice entry-outside-agent" },
    icon("info"),
    h("span", { class: "entry-notice-text" }, `${personName(by)}'s ${agent} started working here through MCP`),
    timeElement(event.ts),
  );
}

function icon(name) {
  return h("span", { class: `icon icon-${name}`, "aria-hidden": "true" });
}

// Where a message interrupted mid-stream (by steering, a resumed marker, a notice) may be cut, so
// that the part above and the part that goes on below each render as the Markdown they are part
// of. Plain text is cut where it was. A line that opens a block which cannot go on in another
// entry (a list item, a quote, a heading, a table row, an indented continuation, a bare marker
// that could turn the line above into a heading) or that holds an open code span, emphasis or
// link moves below whole; an open code block or a table moves below from its first line.
const BLOCK_LINE = /^(\s|[-*+#>|=_~`]|\d)/;

function openFenceStart(complete) {
  let open = null;
  let at = 0;
  for (const line of complete.split("\n")) {
    const fence = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      const marker = fence[1];
      if (!open) open = { at, char: marker[0], size: marker.length };
      else if (marker[0] === open.char && marker.length >= open.size && /^ {0,3}[`~]+\s*$/.test(line)) open = null;
    }
    at += line.length + 1;
  }
  return open ? open.at : null;
}

function tableStart(text, lineStart) {
  let start = lineStart;
  while (start > 0) {
    const previous = text.lastIndexOf("\n", start - 2) + 1;
    if (!/^\s*\|/.test(text.slice(previous, start - 1))) break;
    start = previous;
  }
  return start;
}

function unbalanced(line) {
  const count = (pattern) => (line.match(pattern) || []).length;
  return count(/`/g) % 2 === 1 || count(/\*\*/g) % 2 === 1 || /\[[^\]]*$|\]\([^)]*$/.test(line);
}

// Where the blocks of a streaming message that can no longer change end, searching from `from`
// (itself such an end): before the last line that opens a new block after a blank line, outside
// a code block. A line that could still belong to what is above (indented, a list item, a quote,
// a table row, or a digit that may start a numbered item) is not taken as a new block, so the
// part above renders now as it will when the message is whole.
const NEW_BLOCK = /^[^\s\-*+>|\d]/;

export function settledEnd(text, from) {
  let end = from;
  let fence = null;
  let afterBlank = false;
  let at = from;
  for (const line of text.slice(from).split("\n")) {
    if (afterBlank && NEW_BLOCK.test(line)) end = at;
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (marker) {
      if (!fence) fence = marker[1];
      else if (marker[1][0] === fence[0] && marker[1].length >= fence.length && /^ {0,3}[`~]+\s*$/.test(line)) fence = null;
    }
    afterBlank = !fence && line.trim() === "";
    at += line.length + 1;
  }
  return end;
}

export function safeCut(text) {
  const lineStart = text.lastIndexOf("\n") + 1;
  const fence = openFenceStart(text.slice(0, lineStart));
  if (fence !== null) return fence;
  const line = text.slice(lineStart);
  if (line === "") return text.length;
  if (/^\s*\|/.test(line)) return tableStart(text, lineStart);
  if (BLOCK_LINE.test(line) || unbalanced(line)) return lineStart;
  return text.length;
}

export class Transcript {
  // terminalTypes: the events that end a turn; endedStatuses: the statuses of an ended turn
  // (both from the page config, so the page never keeps its own copy). onQuestionsChange: a
  // question was asked or settled; onUnseen(count): entries arrived while the reader was
  // further up (0 once they are seen); afterReply(card): this person's answer settled a question.
  constructor(
    root,
    {
      me,
      role,
      canAct,
      terminalTypes,
      endedStatuses,
      onTurnChange,
      onQuestionsChange,
      onUnseen,
      afterReply,
      detached = false,
    },
  ) {
    this.root = root;
    this.me = me;
    this.role = role;
    this.canAct = canAct;
    this.terminalTypes = new Set(terminalTypes);
    this.endedStatuses = new Set(endedStatuses);
    this.onTurnChange = onTurnChange;
    this.onQuestionsChange = onQuestionsChange || (() => {});
    this.onUnseen = onUnseen || (() => {});
    this.afterReply = afterReply || null;
    this.turns = new Map();
    this.questions = new Map();
    this.dirty = new Set();
    this.frame = null;
    this.active = null;
    // False while the page replays history; see goLive.
    this.live = false;
    // The day of the last entry placed (a separator goes before the first entry of a new day).
    this.lastDay = null;
    // Entries placed since the last frame, and those the reader has not scrolled down to yet.
    this.added = 0;
    this.unseen = 0;
    this.timesAt = 0;
    // Whether the reader follows the latest. The page opens following it, and stops only when the
    // reader scrolls up away from the end (again once back there): learnt from their scrolling,
    // not measured as events come, when a tall header or history not yet drawn would say no.
    this.following = true;
    this.scrolledTo = 0;
    this.placedQuestion = null;
    // A transcript built apart (earlier turns, see prependEarlier) neither scrolls nor counts.
    if (detached) return;
    window.addEventListener("scroll", () => this.scrolled(), { passive: true });
    // What grows between events (a picker's folder loading) is followed too.
    new ResizeObserver(() => {
      if (this.following && this.frame === null) this.keepLatestInView();
    }).observe(root);
  }

  // Earlier turns (a history page: whole turns, all older than what is shown), built apart and
  // put above, where the reader's place is kept: what they were looking at stays where it was.
  prependEarlier(events) {
    const older = new Transcript(h("div"), {
      me: this.me,
      role: this.role,
      canAct: this.canAct,
      terminalTypes: [...this.terminalTypes],
      endedStatuses: [...this.endedStatuses],
      onTurnChange() {},
      detached: true,
    });
    for (const event of events) older.apply(event);
    older.flush();
    const page = document.scrollingElement;
    const height = page.scrollHeight;
    // What is shown began with its day's separator: not needed if the earlier part ends that day.
    const first = this.root.firstElementChild;
    if (first?.classList.contains("day-separator") && first.querySelector("time")?.getAttribute("datetime") === older.lastDay) {
      first.remove();
    }
    this.root.prepend(...older.root.childNodes);
    page.scrollTop += page.scrollHeight - height;
    for (const [id, turn] of older.turns) this.turns.set(id, turn);
    for (const [id, card] of older.questions) this.questions.set(id, card);
    if (!this.lastDay) this.lastDay = older.lastDay;
  }

  // Render now what waits for the next frame, without following or counting (built apart).
  flush() {
    if (this.frame !== null) cancelAnimationFrame(this.frame);
    this.follow = false;
    this.render();
  }

  // The page has caught up with what was stored: from now on questions load what they need
  // (a picker's folder), and failures are announced as they happen.
  goLive() {
    this.live = true;
    for (const card of this.questions.values()) card.activate();
  }

  apply(event) {
    // Each entry placed while applying it carries its seq (see placed): permalink.js finds it.
    this.seq = event.seq;
    this.scheduleRender();
    const turn = this.turn(event);
    const data = event.data || {};
    switch (event.type) {
      case "turn.started":
        this.started(turn, event);
        break;
      case "message.delta":
        this.openMessage(turn, event.ts).streamed += data.text;
        this.markDirty(turn.message);
        break;
      case "message.completed":
        this.completeMessage(turn, data.text, event.ts);
        break;
      case "tool.started":
        this.toolStarted(turn, data, event.ts);
        break;
      case "tool.completed":
        this.toolCompleted(turn, data, event.ts);
        break;
      case "selection.requested":
        this.asked(turn, data, event.ts);
        break;
      case "selection.resolved":
        this.questions.get(data.selection)?.resolve(data);
        turn.settled = data;
        this.setStatus(turn, "running");
        break;
      case "selection.reminded":
      case "selection.escalated":
        this.calledOn(event);
        break;
      case "turn.steered":
        this.interrupt(turn, this.steered(event), event.ts);
        break;
      case "turn.resumed":
        this.interrupt(turn, this.resumed(event, turn.settled), event.ts);
        break;
      case "turn.notice":
        this.interrupt(turn, this.notice(event), event.ts);
        break;
      default:
        if (this.terminalTypes.has(event.type)) this.ended(turn, event);
    }
  }

  turn(event) {
    let turn = this.turns.get(event.turn);
    if (!turn) {
      const body = h("div", { class: "turn-body" });
      const end = h("p", { class: "turn-end" });
      const endRow = h("footer", { class: "turn-end-row", hidden: true }, end);
      const element = h("article", { class: "turn", dataset: { turn: event.turn } }, body, endRow);
      turn = {
        id: event.turn,
        element,
        body,
        end,
        endRow,
        status: null,
        // How it ended, in words (without its tokens), once it has.
        ending: "",
        message: null,
        // Text of the agent's current message already placed in entries above (before a
        // steering entry, a resumed marker or a notice).
        carried: 0,
        tools: new Map(),
        // Its latest question's outcome (selection.resolved's data), for a resumed marker.
        settled: null,
      };
      this.turns.set(event.turn, turn);
      document.getElementById("transcript-empty")?.remove();
      this.root.append(element);
    }
    return turn;
  }

  // A new entry, placed: a day separator before it if its day is not the last entry's, and
  // counted for a reader who is further up. `anchor` is where a separator would go (the turn
  // itself for its first entry, so that days separate turns rather than sit inside them).
  placed(element, ts, anchor = element) {
    element.dataset.seq = this.seq;
    const key = dayKey(ts);
    if (key && key !== this.lastDay) {
      this.lastDay = key;
      anchor.before(
        h("h2", { class: "day-separator" }, h("time", { class: "day-label", datetime: key }, dayLabel(key))),
      );
    }
    this.added += 1;
  }

  started(turn, event) {
    const { input, started_by: by, interactive } = event.data;
    // An outside agent's turn began when it first acted: nobody typed its input, so it is said
    // as a quiet line of what happened, not as a person's message.
    const entry = event.data.agent === "external" ? outsideAgentEntry(event) : h(
      "div",
      { class: "entry entry-input" },
      h(
        "header",
        { class: "entry-header" },
        h("span", { class: "who" }, personName(by)),
        timeElement(event.ts),
        interactive === false ? h("span", { class: "tag" }, "not interactive") : null,
      ),
      h("div", { class: "entry-text" }, input),
    );
    turn.body.before(entry);
    this.placed(entry, event.ts, turn.element.firstElementChild === entry ? turn.element : entry);
    this.setStatus(turn, "running");
  }

  openMessage(turn, ts) {
    if (!turn.message) {
      const content = h("div", { class: "markdown" });
      // Hidden until it has something to show: a message of blank lines is no message.
      const element = h(
        "div",
        { class: "entry entry-agent streaming", hidden: true },
        h("header", { class: "entry-header" }, h("span", { class: "who who-agent" }, "Agent"), timeElement(ts)),
        content,
      );
      turn.body.append(element);
      this.placed(element, ts);
      turn.message = {
        element,
        content,
        streamed: "",
        text: null,
        offset: turn.carried,
        open: true,
        // What of the streamed text is shown for good: its length, and the nodes it made.
        settled: 0,
        settledNodes: 0,
      };
    }
    return turn.message;
  }

  completeMessage(turn, text, ts) {
    const message = this.openMessage(turn, ts);
    const own = text.slice(message.offset);
    if (message.streamed !== own && message.streamed !== "") {
      // Never expected: every delta is applied once, in order. Say so, and show the whole text.
      console.warn("parley: repaired a message whose streamed text differed from the stored one", {
        turn: turn.id,
      });
    }
    turn.carried = 0;
    message.text = own;
    this.closeMessage(turn);
  }

  // Steering, the turn being resumed elsewhere, or a notice (`element`) can come while the
  // agent is mid-message: the message stops above it and goes on below it in a new entry that
  // shows only what follows (its offset; message.completed carries the whole text, see
  // completeMessage). Where it is cut, see safeCut.
  interrupt(turn, element, ts) {
    const message = turn.message;
    let rest = "";
    if (message) {
      const cut = safeCut(message.streamed);
      rest = message.streamed.slice(cut);
      message.streamed = message.streamed.slice(0, cut);
      turn.carried += cut;
      this.closeMessage(turn);
    }
    turn.body.append(element);
    this.placed(element, ts);
    if (rest) {
      this.openMessage(turn, ts).streamed = rest;
      this.markDirty(turn.message);
    }
  }

  closeMessage(turn) {
    const message = turn.message;
    if (!message) return;
    turn.message = null;
    message.open = false;
    message.element.classList.remove("streaming");
    if (!(message.text ?? message.streamed).trim()) {
      message.element.remove();
      this.dirty.delete(message);
      return;
    }
    this.markDirty(message);
  }

  markDirty(message) {
    this.dirty.add(message);
    this.scheduleRender();
  }

  // Changes are shown once per frame, however fast the events come: Markdown is rendered then,
  // and the page follows the end of the transcript if the reader was at the end before;
  // otherwise what arrived is counted for them (onUnseen). A message still streaming renders
  // only its last block again each frame (see renderStreaming); one that has ended, once whole.
  scheduleRender() {
    if (this.frame === null) {
      this.follow = this.following;
      this.frame = requestAnimationFrame(() => this.render());
    }
  }

  render() {
    this.frame = null;
    for (const message of this.dirty) {
      const text = message.text ?? message.streamed;
      message.element.hidden = !text.trim();
      if (message.open) {
        this.renderStreaming(message, text);
      } else {
        message.content.innerHTML = renderMarkdown(text);
      }
    }
    this.dirty.clear();
    const added = this.added;
    this.added = 0;
    if (this.follow) {
      this.keepLatestInView();
      if (this.unseen) this.setUnseen(0);
    } else if (added && this.live) {
      this.setUnseen(this.unseen + added);
    }
  }

  // A streaming message's blocks that can no longer change (see settledEnd) are rendered once,
  // when the next one begins; only the block being written is rendered again, each frame. So a
  // frame costs the length of a block, not of the whole message so far.
  renderStreaming(message, text) {
    const content = message.content;
    while (content.childNodes.length > message.settledNodes) content.lastChild.remove();
    const end = settledEnd(text, message.settled);
    if (end > message.settled) {
      content.insertAdjacentHTML("beforeend", renderMarkdown(text.slice(message.settled, end)));
      message.settled = end;
      message.settledNodes = content.childNodes.length;
    }
    content.insertAdjacentHTML("beforeend", renderMarkdown(text.slice(message.settled)));
  }

  scrolled() {
    const top = document.scrollingElement.scrollTop;
    const near = this.nearBottom();
    // The reader moved: the question waiting is theirs to place from now on.
    if (top !== this.scrolledTo) this.placedQuestion = this.latestAnswerable();
    // Up, away from the end: the reader reads. Content growing below, or the page following it,
    // never scrolls up.
    if (near) this.following = true;
    else if (top < this.scrolledTo) this.following = false;
    this.scrolledTo = top;
    if (this.unseen && near) this.setUnseen(0);
  }

  nearBottom() {
    const page = document.scrollingElement;
    return page.scrollTop + window.innerHeight >= page.scrollHeight - NEAR_END;
  }

  scrollToEnd() {
    const page = document.scrollingElement;
    page.scrollTop = page.scrollHeight;
    this.scrolledTo = page.scrollTop;
  }

  // The end of the transcript, just above the footer; but a question waiting for this person
  // that is taller than the room keeps its prompt in view (its top at the top), until the
  // reader scrolls on their own.
  keepLatestInView() {
    this.scrollToEnd();
    const card = this.latestAnswerable();
    if (!card || card === this.placedQuestion || card.element.getBoundingClientRect().top >= 0) return;
    card.element.scrollIntoView({ block: "start" });
    this.scrolledTo = document.scrollingElement.scrollTop;
  }

  // Go to the latest (the person sent something, or asked to), and keep following it.
  jumpToEnd() {
    this.follow = true;
    this.following = true;
    this.scrollToEnd();
    this.setUnseen(0);
  }

  setUnseen(count) {
    this.unseen = count;
    this.onUnseen(count);
  }

  toolStarted(turn, data, ts) {
    this.closeMessage(turn);
    const state = h("span", { class: "tool-state" }, "running…");
    const detail = h(
      "div",
      { class: "tool-detail" },
      h("p", { class: "tool-label" }, "Arguments"),
      argumentsList(data.arguments),
    );
    const args = argumentsSummary(data.arguments);
    const element = h(
      "details",
      { class: "tool", dataset: { state: "running", tool: data.name } },
      h(
        "summary",
        {},
        h("span", { class: "tool-name" }, data.name),
        args ? h("span", { class: "tool-args" }, args) : null,
        state,
        timeElement(ts),
      ),
      detail,
    );
    turn.body.append(element);
    this.placed(element, ts);
    turn.tools.set(data.id, { element, state, detail });
  }

  toolCompleted(turn, data, ts) {
    let tool = turn.tools.get(data.id);
    if (!tool) {
      this.toolStarted(turn, { id: data.id, name: data.name, arguments: {} }, ts);
      tool = turn.tools.get(data.id);
    }
    const failed = "error" in data;
    tool.element.dataset.state = failed ? "failed" : "done";
    tool.state.textContent = failed ? "failed" : "done";
    tool.detail.append(...toolOutcome(data));
  }

  asked(turn, selection, ts) {
    this.closeMessage(turn);
    const card = new QuestionCard(selection, {
      me: this.me,
      role: this.role,
      canAct: this.canAct,
      askedAt: ts,
      deliveries: true,
      afterReply: this.afterReply,
      onResolve: () => this.onQuestionsChange(),
    });
    this.questions.set(selection.id, card);
    turn.body.append(card.element);
    this.placed(card.element, ts);
    if (this.live) card.activate();
    this.setStatus(turn, "awaiting_input");
    this.onQuestionsChange();
  }

  // The latest question still waiting that this person may answer, if any.
  latestAnswerable() {
    let latest = null;
    for (const card of this.questions.values()) {
      if (card.status === "pending" && card.canAnswer) latest = card;
    }
    return latest;
  }

  steered(event) {
    const data = event.data || {};
    return h(
      "div",
      { class: "entry entry-steer" },
      h(
        "header",
        { class: "entry-header" },
        h("span", { class: "who" }, personName(data.by)),
        h("span", { class: "tag tag-steer" }, "steered the turn"),
        timeElement(event.ts),
      ),
      h("div", { class: "entry-text" }, data.input),
    );
  }

  // A small marker where another process took the turn over and went on from its journal:
  // nothing said before is repeated, so it only says why there was a seam. The processes are
  // for whoever debugs it, in the tooltip.
  resumed(event, settled) {
    const { reason, process, previous } = event.data || {};
    const by = process ? `Taken over by ${process}${previous ? ` from ${previous}` : ""}` : null;
    return h(
      "p",
      { class: "entry-resumed", dataset: { reason: reason || "" }, title: by },
      icon("retry"),
      h("span", {}, resumedWords(reason, settled)),
      timeElement(event.ts),
    );
  }

  // What the agent lets people know while it works (a retry, a limit reached), as a quiet line
  // where it happened, like the resumed marker; a status, so a screen reader says it too.
  // A question still waiting called on its people (a reminder) or on the owners (escalated):
  // said on its card, which is where people look for it.
  calledOn(event) {
    const { selection, to } = event.data || {};
    const card = this.questions.get(selection);
    if (!card) return;
    const people = Array.isArray(to) ? to : [];
    const names = people.length > 3 ? `${people.length} people` : people.map(personName).join(", ");
    const reminded = event.type === "selection.reminded";
    card.element.dataset[reminded ? "reminded" : "escalated"] = "true";
    card.element.querySelector(".question-header")?.append(
      h(
        "span",
        { class: `tag ${reminded ? "tag-reminded" : "tag-escalated"}`, title: event.ts },
        reminded ? `Reminded ${names}` : `Escalated to ${names}`,
      ),
    );
  }

  notice(event) {
    const { kind, text } = event.data || {};
    return h(
      "p",
      { class: "entry-notice", role: "status", dataset: { kind: kind || "" } },
      icon(NOTICE_ICONS[kind] || "info"),
      h("span", { class: "entry-notice-text" }, text || ""),
      timeElement(event.ts),
    );
  }

  ended(turn, event) {
    this.closeMessage(turn);
    const data = event.data || {};
    // A turn that said and did nothing did complete, but has nothing to show for it.
    const quiet = !turn.body.querySelector(".entry-agent, .tool, .question");
    const words = {
      "turn.completed": ["completed", quiet ? "Completed with no reply" : "Completed"],
      "turn.failed": ["failed", `Failed: ${data.error || "unknown error"}`],
      "turn.cancelled": ["cancelled", data.by ? `Stopped by ${personName(data.by)}` : "Stopped"],
    };
    const [status, text] = words[event.type];
    turn.ending = text;
    turn.end.textContent = text;
    const tokens = this.tokens(data.usage);
    if (tokens) turn.end.append(tokens);
    turn.end.dataset.status = status;
    if (quiet && status === "completed") turn.end.dataset.quiet = "true";
    if (status === "failed" && this.live) turn.end.setAttribute("role", "alert");
    turn.endRow.append(timeElement(event.ts));
    turn.endRow.hidden = false;
    this.placed(turn.endRow, event.ts);
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

  // Every second: the questions' countdowns; now and then, the entries' times and days.
  tick(now) {
    for (const card of this.questions.values()) card.tick(now);
    if (now - this.timesAt >= TIMES_EVERY_MS) {
      this.timesAt = now;
      refreshTimes(this.root, now);
    }
  }
}
