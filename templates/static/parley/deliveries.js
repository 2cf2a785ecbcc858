// Where a question went, on its card: a disclosure that, each time it is opened, reads the
// question's deliveries (every email, Slack message and webhook it caused, and whether each
// worked) from /api/selections/<id>/deliveries/.

import { ApiError, api } from "./api.js";
import { formatTime, h } from "./dom.js";

function statusOf(delivery) {
  switch (delivery.status) {
    case "sent":
      return ["sent ", h("time", { datetime: delivery.sent_at }, formatTime(delivery.sent_at))];
    case "pending": {
      const at = delivery.next_attempt_at;
      if (Date.parse(at) <= Date.now()) return ["sending…"];
      const until = h("time", { datetime: at }, formatTime(at));
      return delivery.attempts && delivery.reason
        ? ["trying again at ", until, ` (${delivery.reason})`]
        : ["waits until ", until];
    }
    default:
      return [delivery.reason ? `${delivery.status}: ${delivery.reason}` : delivery.status];
  }
}

function row(delivery) {
  return h(
    "li",
    { class: "delivery", dataset: { status: delivery.status, channel: delivery.channel } },
    h("span", { class: "delivery-went" }, delivery.went),
    " · ",
    h("span", { class: `delivery-status delivery-${delivery.status}` }, ...statusOf(delivery)),
  );
}

export function deliveriesDisclosure(selectionId) {
  const list = h("ul", { class: "delivery-list", "aria-live": "polite" });
  const details = h(
    "details",
    { class: "question-deliveries" },
    h("summary", {}, "Where it went"),
    list,
  );
  let reading = 0;
  details.addEventListener("toggle", async () => {
    if (!details.open) return;
    const mine = ++reading;
    list.setAttribute("aria-busy", "true");
    let rows;
    try {
      const deliveries = await api(`/selections/${encodeURIComponent(selectionId)}/deliveries/`);
      rows = deliveries.length
        ? deliveries.map(row)
        : [h("li", { class: "muted" }, "Not sent anywhere outside Parley.")];
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      rows = [h("li", { class: "form-error" }, error.message)];
    }
    if (mine !== reading) return; // opened again meanwhile: the later reading shows
    list.removeAttribute("aria-busy");
    list.replaceChildren(...rows);
  });
  return details;
}
