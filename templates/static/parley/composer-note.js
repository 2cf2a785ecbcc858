// What the composer says of the question that waits: whom the agent asks (you, someone else by
// name, or anyone who may answer), and what Enter does about it.

import { personName } from "./dom.js";

function asked(card, me) {
  const addressee = card.selection.addressee;
  if (!addressee) return { whom: "anyone", whose: "an answer", also: "" };
  if (addressee.id === me.id) return { whom: "you", whose: "your answer", also: "" };
  const name = personName(addressee);
  // Only an owner may answer a question addressed to someone else.
  return { whom: name, whose: `${name}’s answer`, also: " (as an owner, you may answer it)" };
}

// `mode`: "answer" (Enter answers it), "point" (Enter goes to it) or "steer" (Enter steers).
export function composerNote(card, mode, me) {
  const quoted = `“${card.promptText}”`;
  const { whom, whose, also } = asked(card, me);
  if (mode === "answer") return `The agent asks ${whom}${also}: ${quoted} — Enter sends your answer.`;
  if (mode === "point") return `The agent is waiting for ${whose} to ${quoted} above${also}.`;
  return "The agent is waiting for an answer above: what you send now steers the turn instead.";
}
