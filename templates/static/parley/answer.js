// The page an answer link opens: one question with its full widget, answered as the link's
// person. The link's signature is in the address's fragment (#k=…), which the browser never sends
// to any server: this script reads it and sends it with every call (X-Parley-Link), which signs
// the person in for this one question only. Opening the page answers nothing; answering is the
// widget's POST.

import { ApiError, api, configureApi } from "./api.js";
import { h, personName } from "./dom.js";
import { QuestionCard } from "./questions.js";

const config = JSON.parse(document.getElementById("parley-config").textContent);
const page = document.getElementById("answer-page");
const token = new URLSearchParams(window.location.hash.slice(1)).get("k") || "";
configureApi({ csrf: config.csrf, login: null, headers: { "X-Parley-Link": token } });

function refuse(message) {
  document.getElementById("answer-title").textContent = "This link does not open";
  const refusal = document.getElementById("answer-refusal");
  refusal.textContent = message;
  refusal.hidden = false;
  page.setAttribute("aria-busy", "false");
}

async function open() {
  if (!token) {
    refuse("This link is not whole: open the one you were sent, all of it.");
    return;
  }
  let shown;
  try {
    shown = await api(`/selections/${encodeURIComponent(config.selection)}/link/`);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refuse(error.message);
    return;
  }
  const { selection, conversation, workspace, started_by: startedBy, input, me, role } = shown;
  const title = `A question in “${conversation.title}”`;
  document.title = `${title} · Parley`;
  document.getElementById("answer-title").textContent = title;
  document.getElementById("answer-context").textContent =
    `${workspace.name} · asked by the agent${startedBy ? ` in ${personName(startedBy)}’s turn` : ""}`;
  if (input) {
    const why = document.getElementById("answer-why");
    why.textContent = input;
    why.hidden = false;
  }
  const card = new QuestionCard(selection, { me, role, canAct: role !== "viewer" });
  document.getElementById("answer-question").append(card.element);
  card.activate();
  const holder = document.getElementById("answer-holder");
  holder.append(
    "You answer as ",
    h("strong", {}, personName(me)),
    ": this link is yours, for this question only. ",
    h("a", { href: `/conversations/${encodeURIComponent(conversation.id)}/#question-${encodeURIComponent(selection.id)}` }, "Open the conversation"),
    " (you may be asked to sign in).",
  );
  holder.hidden = false;
  page.setAttribute("aria-busy", "false");
  window.parleyAnswer = card;
}

open();
