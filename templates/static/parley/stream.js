// A conversation's live event stream over its WebSocket, resumed exactly where it stopped.
//
// The stream keeps the seq of the last event it applied. An event at or below it is a duplicate
// and dropped; one beyond the next seq means a hole, and the socket is asked to `resume` from the
// last seq (the server sends everything after it again, in order). When the socket drops, it
// reconnects after 1, 2, 4, 8, then 16 seconds (each with jitter, so that a restarted server is
// not hit by every browser at once) and asks for everything after the last seq. A server that is
// shutting down closes its sockets with 1012 ("service restart"): a cue to reconnect at once,
// without waiting (another process, or the restarted one, answers; its turns go on there).
// A page that fell too far behind (its socket's buffer on the server stayed full, say while the
// tab was frozen) is closed with 4408, and likewise reconnects at once from its last seq.
// Dropping the socket never stops a turn: only Stop does.

const BACKOFF_SECONDS = [1, 2, 4, 8, 16];
const SERVICE_RESTART = 1012;
const FELL_BEHIND = 4408;
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
    this.socket = null;
    this.attempts = 0;
    this.timer = null;
    this.resuming = false;
    this.stopped = false;
    // What happened, for people debugging a connection (and for the browser tests).
    this.stats = { connections: 0, duplicates: 0, holes: 0 };
  }

  start() {
    this.connect();
    window.addEventListener("online", () => {
      this.attempts = 0;
      this.reconnectNow();
    });
    window.addEventListener("offline", () => this.wentOffline());
  }

  // The network is gone: say so at once, and wait for it to come back (the `online` event)
  // rather than retrying on a timer; a half-dead socket could otherwise look live for minutes.
  wentOffline() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.stopResumeWatch();
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(4000, "offline");
    this.setState("offline");
  }

  connect() {
    clearTimeout(this.timer);
    this.stopResumeWatch();
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const url =
      `${scheme}://${window.location.host}/ws/conversations/${encodeURIComponent(this.conversationId)}/` +
      `?from_seq=${this.lastSeq}&presence=1`;
    this.setState("connecting");
    const socket = new WebSocket(url);
    this.socket = socket;
    this.stats.connections += 1;
    socket.addEventListener("message", (message) => {
      if (socket === this.socket) this.receive(message.data);
    });
    socket.addEventListener("close", (event) => this.closed(socket, event));
  }

  send(frame) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof frame.seq === "number") {
      this.event(frame);
      return;
    }
    switch (frame.type) {
      case "ws.ready":
        this.attempts = 0;
        this.setState("live");
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
          this.stopped = true;
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
          if (this.resuming && this.socket) this.socket.close(4000, "resume brought nothing");
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

  closed(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    if (this.stopped) return;
    if (event.code === 4401 || event.code === FORBIDDEN) {
      this.stopped = true;
      this.setState("closed");
      this.onClosedForGood(event.code === 4401 ? "signed-out" : "forbidden");
      return;
    }
    if (event.code === ACCESS_CHANGED) {
      this.stopped = true;
      this.onClosedForGood("reset");
      return;
    }
    // Still "live" here means the socket was ready until it closed (see receive): only such a
    // socket reconnects at once, so a server that closes every new socket during its restart
    // is not hammered in a loop but met with the backoff.
    const wasLive = this.state === "live";
    this.stopResumeWatch();
    if (navigator.onLine === false) {
      this.setState("offline"); // the `online` event reconnects
      return;
    }
    if ((event.code === SERVICE_RESTART || event.code === FELL_BEHIND) && wasLive) {
      this.connect();
      return;
    }
    const base = BACKOFF_SECONDS[Math.min(this.attempts, BACKOFF_SECONDS.length - 1)];
    const delay = base * (0.5 + Math.random()) * 1000;
    this.attempts += 1;
    this.setState("reconnecting", Date.now() + delay);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  reconnectNow() {
    if (!this.stopped && this.socket === null) this.connect();
  }

  setState(state, retryAt = null) {
    this.state = state;
    this.onState(state, retryAt);
  }
}
