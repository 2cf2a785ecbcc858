// A conversation's live event stream over its WebSocket, resumed exactly where it stopped.
//
// The stream keeps the seq of the last event it applied. An event at or below it is a duplicate
// and dropped; one beyond the next seq means a hole, and the socket is asked to `resume` from the
// last seq (the server sends everything after it again, in order). When the socket drops, it
// reconnects with the backoff of socket.js and asks for everything after the last seq. A server
// that is shutting down closes its sockets with 1012 ("service restart"): a cue to reconnect at
// once, without waiting (another process, or the restarted one, answers; its turns go on there).
// A page that fell too far behind (its socket's buffer on the server stayed full, say while the
// tab was frozen) is closed with 4408, and likewise reconnects at once from its last seq.
// Dropping the socket never stops a turn: only Stop does.

import { ReconnectingSocket } from "./socket.js";

const SERVICE_RESTART = 1012;
const FELL_BEHIND = 4408;
const UNAUTHENTICATED = 4401;
// The person's access changed while the page was open: 4403 they are no longer a member (the
// page says so and stops), 4409 their role was lowered (the page reloads as what they now are).
const FORBIDDEN = 4403;
const ACCESS_CHANGED = 4409;
const RESUME_REF = "resume";
// A resume that brings nothing back this long is given up: the socket is dropped and the
// reconnect (from the last seq applied) fills the hole instead.
const RESUME_PATIENCE_MS = 5000;

export class ConversationStream {
  constructor({ conversationId, onReady, onEvent, onPresence, onState, onClosedForGood }) {
    this.conversationId = conversationId;
    this.onReady = onReady;
    this.onEvent = onEvent;
    this.onPresence = onPresence;
    this.onState = onState;
    this.onClosedForGood = onClosedForGood;
    this.lastSeq = 0;
    this.resuming = false;
    // What happened, for people debugging a connection (and for the browser tests).
    this.stats = { connections: 0, duplicates: 0, holes: 0 };
    this.connection = new ReconnectingSocket({
      path: () =>
        `/ws/conversations/${encodeURIComponent(this.conversationId)}/` +
        `?from_seq=${this.lastSeq}&presence=1`,
      onFrame: (frame) => this.receive(frame),
      onState: (state, retryAt) => this.setState(state, retryAt),
      onConnect: () => {
        this.stats.connections += 1;
      },
      // A resume asked of a socket that is gone brings nothing: the next one replays instead.
      onDrop: () => this.stopResumeWatch(),
      onStop: (code) => this.closedForGood(code),
      reconnectAtOnce: [SERVICE_RESTART, FELL_BEHIND],
      stopOn: [UNAUTHENTICATED, FORBIDDEN, ACCESS_CHANGED],
      followNetwork: true,
    });
  }

  start() {
    this.connection.start();
  }

  send(frame) {
    return this.connection.send(frame);
  }

  receive(frame) {
    if (typeof frame.seq === "number") {
      this.event(frame);
      return;
    }
    switch (frame.type) {
      case "ws.ready":
        this.connection.confirm();
        this.onReady(frame);
        break;
      case "presence":
        this.onPresence(frame.people);
        break;
      case "ws.ack":
        break;
      case "ws.error":
        if (frame.ref === RESUME_REF) this.stopResumeWatch();
        if (frame.code === "invalid_from_seq") {
          // The conversation no longer has what this page holds (its log was reset): start over.
          this.connection.stop();
          this.onClosedForGood("reset");
        } else {
          console.warn("parley: the server refused a frame", frame);
        }
        break;
      default:
        break;
    }
  }

  event(frame) {
    if (frame.seq <= this.lastSeq) {
      this.stats.duplicates += 1;
      return;
    }
    if (frame.seq > this.lastSeq + 1) {
      // A hole: ask for everything after the last event applied; later frames are dropped
      // until the missing ones arrive, in order.
      this.stats.holes += 1;
      if (!this.resuming && this.send({ type: "resume", ref: RESUME_REF, from_seq: this.lastSeq })) {
        this.resuming = true;
        this.resumeWatch = setTimeout(() => {
          if (this.resuming) this.connection.drop(4000, "resume brought nothing");
        }, RESUME_PATIENCE_MS);
      }
      return;
    }
    this.lastSeq = frame.seq;
    // The next event in order: the hole, if there was one, is filled.
    if (this.resuming) this.stopResumeWatch();
    this.onEvent(frame);
  }

  stopResumeWatch() {
    this.resuming = false;
    clearTimeout(this.resumeWatch);
  }

  // Signed out (the page logs in again), no longer a member (it says so), or a lowered role
  // (it reloads as what the person now is, so it says nothing first).
  closedForGood(code) {
    if (code === ACCESS_CHANGED) {
      this.onClosedForGood("reset");
      return;
    }
    this.setState("closed");
    this.onClosedForGood(code === UNAUTHENTICATED ? "signed-out" : "forbidden");
  }

  reconnectNow() {
    this.connection.reconnectNow();
  }

  setState(state, retryAt = null) {
    this.state = state;
    this.onState(state, retryAt);
  }
}
