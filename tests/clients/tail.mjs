// The npm `eventsource` package (4.x) reading a conversation's tail, as a browser's EventSource
// would: it reconnects by itself with Last-Event-ID when the connection is cut, and is never
// closed by this script: it must stop by itself once the tail says nothing more will come.
//
//   node tests/clients/tail.mjs <tail url> <token> [timeout seconds]
//
// Prints one JSON line per thing seen: {"kind": "open"}, {"kind": "event", "id", "seq", "type"}
// for each event, {"kind": "done", "id", "data"}, {"kind": "error", "code", "message",
// "readyState"}; then {"kind": "stopped", "readyState"} once the EventSource is CLOSED, and the
// process ends on its own (nothing keeps it alive). Past the timeout: {"kind": "timeout"}, exit 2.
import { EventSource } from "eventsource";

const [url, token, timeoutSeconds = "60"] = process.argv.slice(2);
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");

// The token goes in a header; the package lets a fetch of our own add it.
const source = new EventSource(url, {
  fetch: (input, init) =>
    fetch(input, { ...init, headers: { ...init.headers, Authorization: `Token ${token}` } }),
});

source.onopen = () => say({ kind: "open" });
source.onmessage = (message) => {
  const event = JSON.parse(message.data);
  say({ kind: "event", id: message.lastEventId, seq: event.seq, type: event.type });
};
source.addEventListener("done", (message) =>
  say({ kind: "done", id: message.lastEventId, data: JSON.parse(message.data) }),
);
source.onerror = (error) => {
  say({
    kind: "error",
    code: error.code ?? null,
    message: error.message ?? null,
    readyState: source.readyState,
    at: Date.now(),
  });
  if (source.readyState === EventSource.CLOSED) {
    say({ kind: "stopped", readyState: source.readyState });
  }
};

// Unreferenced: it keeps nothing alive, so the process ends as soon as the EventSource has
// nothing left to do; it fires only if the EventSource never stops.
setTimeout(() => {
  say({ kind: "timeout", readyState: source.readyState });
  process.exit(2);
}, Number(timeoutSeconds) * 1000).unref();
