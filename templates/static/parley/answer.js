// The page an answer link opens: one question with its full widget, answered as the link's
// person. The link signs them in for this question only: every call carries it (X-Parley-Link),
// and nothing else of Parley is reachable with it.

import { configureApi } from "./api.js";
import { QuestionCard } from "./questions.js";

const config = JSON.parse(document.getElementById("parley-config").textContent);
configureApi({ csrf: config.csrf, login: null, headers: { "X-Parley-Link": config.link } });

const card = new QuestionCard(config.selection, { me: config.me, role: config.role, canAct: config.can_act });
document.getElementById("answer-question").append(card.element);
card.activate();
window.parleyAnswer = card;
