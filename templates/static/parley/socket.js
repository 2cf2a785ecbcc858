// A WebSocket that opens itself again when it drops, for every socket the pages keep: its ws or
// wss address from the page's own, JSON frames, and the reconnects. Those back off for 1, 2, 4,
// 8, then 16 seconds (each with jitter, so that a restarted server is not hit by every browser
// at once), starting over once the server has confirmed a socket as good. Its owner names the
// close codes that call for a reconnect at once and those after which it must not reconnect,
// and whether it follows the browser's word on the network (offline: say so and wait for the
// `online` event rather than retry on a timer). What the frames mean is the owner's business.

const BACKOFF_SECONDS = [1, 2, 4, 8, 16];

export class ReconnectingSocket {
  // path(): what to open, asked anew for each socket (a reconnect carries where its owner got
  // to). onFrame(frame): each JSON frame of the socket in use. onState(state, retryAt): where the
  // socket is, "connecting", "live" (see confirm), "reconnecting" (at retryAt) or "offline".
  // onConnect(): a socket was opened. onDrop(): the socket in use is gone, and another follows.
  // onStop(code): it closed with one of `stopOn`, and nothing reconnects any more.
  // reconnectAtOnce: the close codes after which a confirmed socket reconnects without waiting.
  constructor({
    path,
    onFrame,
    onState = () => {},
    onConnect = () => {},
    onDrop = () => {},
    onStop = () => {},
    reconnectAtOnce = [],
    stopOn = [],
    followNetwork = false,
  }) {
    this.path = path;
    this.onFrame = onFrame;
    this.onState = onState;
    this.onConnect = onConnect;
    this.onDrop = onDrop;
    this.onStop = onStop;
    this.reconnectAtOnce = new Set(reconnectAtOnce);
    this.stopOn = new Set(stopOn);
    this.followNetwork = followNetwork;
    this.socket = null;
    this.attempts = 0;
    this.timer = null;
    this.confirmed = false;
    this.stopped = false;
  }

  start() {
    this.connect();
    if (!this.followNetwork) return;
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
    this.onDrop();
    const socket = this.socket;
    this.socket = null;
    if (socket) socket.close(4000, "offline");
    this.onState("offline");
  }

  connect() {
    clearTimeout(this.timer);
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${window.location.host}${this.path()}`;
    this.confirmed = false;
    this.onState("connecting");
    const socket = new WebSocket(url);
    this.socket = socket;
    this.onConnect();
    socket.addEventListener("message", (message) => {
      if (socket !== this.socket) return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      this.onFrame(frame);
    });
    socket.addEventListener("close", (event) => this.closed(socket, event));
  }

  // The server says this socket is good (its first frame of substance): the next drop starts
  // the backoff over, and may reconnect at once.
  confirm() {
    this.attempts = 0;
    this.confirmed = true;
    this.onState("live");
  }

  send(frame) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  // Give up on the socket in use: it reconnects as after any other drop.
  drop(code, reason) {
    if (this.socket) this.socket.close(code, reason);
  }

  // No more reconnects: the owner starts over (the page reloads, say).
  stop() {
    this.stopped = true;
  }

  closed(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    if (this.stopped) return;
    if (this.stopOn.has(event.code)) {
      this.stopped = true;
      this.onStop(event.code);
      return;
    }
    this.onDrop();
    if (this.followNetwork && navigator.onLine === false) {
      this.onState("offline"); // the `online` event reconnects
      return;
    }
    // Only a socket the server had confirmed reconnects at once, so that a server that closes
    // every new socket during its restart is not hammered in a loop but met with the backoff.
    if (this.reconnectAtOnce.has(event.code) && this.confirmed) {
      this.connect();
      return;
    }
    const base = BACKOFF_SECONDS[Math.min(this.attempts, BACKOFF_SECONDS.length - 1)];
    const delay = base * (0.5 + Math.random()) * 1000;
    this.attempts += 1;
    this.onState("reconnecting", Date.now() + delay);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  // At once, without waiting for the backoff (the person asked, or the network is back).
  reconnectNow() {
    if (!this.stopped && this.socket === null) this.connect();
  }
}
