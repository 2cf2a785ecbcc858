// What the composer says: in each of its modes, and of the question that waits: whom the agent asks (you, someone else by
// name, or anyone who may answer), and what Enter does about it.

import { personName } from "./dom.js";
import { ENTER_RULE } from "./drafts.js";

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

// The composer's modes: what its button, label, placeholder and hint say in each. `hint` is the
// text of the page's config (how to start: "(try 'help')").
export const composerModes = (hint) => ({
  send: {
    button: "Send",
    label: "Message the agent",
    placeholder: () => `Ask the agent something…${hint}`,
    hint: `${ENTER_RULE} While the agent works, what you send steers it, and Esc stops it.`,
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
});
