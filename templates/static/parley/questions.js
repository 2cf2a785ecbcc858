// Questions the agent asks mid-turn, shown where it asked them: one widget per kind, a countdown
// to expiry, Dismiss, and (once anyone answers, from anywhere) the outcome and who gave it.

import { ApiError, api } from "./api.js";
import { deliveriesDisclosure } from "./deliveries.js";
import { Draft, ENTER_RULE, sendOnEnter } from "./drafts.js";
import { formatBytes, h, personName, timeElement, uniqueId } from "./dom.js";
import { renderInlineMarkdown } from "./markdown.js";

const OUTCOME_WORDS = {
  answered: "Answered",
  dismissed: "Dismissed",
  declined: "Declined",
  expired: "Expired",
  cancelled: "Cancelled",
};

// Where an answer was given, when that was outside Parley (a question's answered_via).
const VIA_WORDS = { link: "from an answer link", slack: "in Slack" };

const KIND_WORDS = {
  path: { file: "Pick a file", folder: "Pick a folder", any: "Pick a file or folder" },
  choice: "Choose",
  text: "Type an answer",
  confirm: "Confirm",
  form: "Fill in the form",
};

function kindWords(selection) {
  const words = KIND_WORDS[selection.kind];
  return typeof words === "string" ? words : words[selection.mode] || words.file;
}

function countdownText(seconds) {
  if (seconds <= 0) return "expiring…";
  if (seconds >= 3600) return `expires in ${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  const minutes = Math.floor(seconds / 60);
  const rest = String(Math.floor(seconds % 60)).padStart(2, "0");
  return `expires in ${minutes}:${rest}`;
}

// The agent's words (a prompt, an option's label or description) as inline Markdown, rendered
// safely (see markdown.js). Inside a button a link would be a control in a control: there its
// text stays and the link goes.
function inlineMarkdown(tag, attributes, text, { links = true } = {}) {
  const element = h(tag, attributes);
  element.innerHTML = renderInlineMarkdown(text || "");
  if (!links) for (const link of element.querySelectorAll("a")) link.replaceWith(...link.childNodes);
  return element;
}

// The same words as plain text (for an outcome line, a legend, the composer).
export function plainText(markdown) {
  return inlineMarkdown("span", {}, markdown).textContent;
}

// How an answer reads to people: option labels for values, field titles for a form's keys.
export function describeAnswer(selection, answer) {
  if (answer === null || answer === undefined) return "";
  switch (selection.kind) {
    case "choice": {
      const labels = new Map(selection.options.map((option) => [option.value, plainText(option.label)]));
      const values = Array.isArray(answer) ? answer : [answer];
      return values.map((value) => labels.get(value) || `“${value}”`).join(", ");
    }
    case "confirm":
      return answer ? "yes" : "no";
    case "text":
      return `“${answer}”`;
    case "form": {
      const properties = (selection.schema && selection.schema.properties) || {};
      return Object.entries(answer)
        .map(([key, value]) => {
          const title = (properties[key] && properties[key].title) || key;
          const shown = typeof value === "boolean" ? (value ? "yes" : "no") : String(value);
          return `${title}: ${shown}`;
        })
        .join("; ");
    }
    default:
      return String(answer);
  }
}

// One question. Options: `askedAt` (the time it was asked, shown in its header); `onResolve(card)`
// whenever it stops waiting, however that came about; `afterReply(card)` once this person's
// own answer, dismissal or decline from the card settled it (to move the focus on: without it,
// the focus goes to the outcome); `deliveries`: whether to offer "Where it went" (to those who
// may act in its workspace).
export class QuestionCard {
  constructor(
    selection,
    { me, role, canAct, askedAt = null, onResolve = null, afterReply = null, deliveries = false },
  ) {
    this.selection = selection;
    this.me = me;
    this.role = role;
    this.canAct = canAct;
    this.onResolve = onResolve;
    this.afterReply = afterReply;
    this.status = "pending";
    this.promptId = uniqueId("question-prompt");
    this.countdown = h("span", { class: "question-countdown" });
    this.error = h("p", { class: "form-error question-error", role: "alert", hidden: true });
    this.outcome = h("p", { class: "question-outcome", role: "status", tabindex: "-1", hidden: true });
    const addressee = selection.addressee;
    // The agent's prompt may use Markdown, like the rest of what it says (rendered safely).
    const prompt = inlineMarkdown("p", { class: "question-prompt", id: this.promptId }, selection.prompt);
    this.promptText = prompt.textContent;
    this.element = h(
      "section",
      {
        class: "question",
        id: `question-${selection.id}`,
        "aria-labelledby": this.promptId,
        dataset: { selection: selection.id, kind: selection.kind, status: "pending" },
      },
      h(
        "header",
        { class: "question-header" },
        h("span", { class: "question-badge" }, "Question"),
        h("span", { class: "question-kind" }, kindWords(selection)),
        addressee ? h("span", { class: "question-for" }, `for ${personName(addressee)}`) : null,
        askedAt ? timeElement(askedAt) : null,
        this.countdown,
      ),
      prompt,
    );
    if (this.canAnswer) {
      this.form = this.buildForm();
      this.element.append(this.form);
    } else {
      this.element.append(h("p", { class: "question-waiting muted" }, this.waitingText()));
    }
    this.element.append(this.error, this.outcome);
    if (deliveries && canAct) this.element.append(deliveriesDisclosure(selection.id));
    this.tick(Date.now());
    if (selection.status && selection.status !== "pending") this.resolve(selection);
  }

  // Load what the widget needs from the server (a path picker's folder), once, if the question
  // is still waiting: not for every old question replayed from the log.
  activate() {
    if (this.status === "pending" && this.picker && !this.picker.opened) this.picker.open("");
  }

  get canAnswer() {
    if (!this.canAct) return false;
    const addressee = this.selection.addressee;
    return !addressee || addressee.id === this.me.id || this.role === "owner";
  }

  // Whether a line of text alone can answer it (so that the page's composer may): a text
  // question, or a choice that takes an answer of one's own.
  get takesText() {
    const { kind, allow_freeform: freeform, multiple } = this.selection;
    if (kind === "text") return true;
    if (kind !== "choice" || !freeform) return false;
    return !multiple || (this.selection.min_choices ?? 0) <= 1;
  }

  // Answer with a line of text (see takesText): for a choice, an option named by its label or
  // value, else the text as the person's own answer. Resolves to reply's outcome.
  answerWithText(text) {
    let answer = text;
    if (this.selection.kind === "choice") {
      const wanted = text.toLowerCase();
      const option = this.selection.options.find(
        (item) => item.value.toLowerCase() === wanted || plainText(item.label).toLowerCase() === wanted,
      );
      answer = option ? option.value : text;
      if (this.selection.multiple) answer = [answer];
    }
    return this.reply({ answer });
  }

  // Put the focus on the first control of a question still waiting; false if there is none.
  focusFirstControl() {
    if (this.status !== "pending" || !this.form) return false;
    const enabled = ":not(:disabled)";
    const control =
      this.form.querySelector(`.picker-list input${enabled}, .picker-list button${enabled}`) ||
      this.form.querySelector(`button${enabled}, input${enabled}, select${enabled}, textarea${enabled}`);
    if (!control) return false;
    control.focus();
    return true;
  }

  waitingText() {
    const addressee = this.selection.addressee;
    if (!this.canAct) return "Waiting for a member to answer.";
    return addressee ? `Waiting for ${personName(addressee)} to answer.` : "Waiting for an answer.";
  }

  // Seconds left, shown while the question waits.
  tick(now) {
    if (this.status !== "pending") return;
    const left = (Date.parse(this.selection.expires_at) - now) / 1000;
    this.countdown.textContent = countdownText(left);
    this.countdown.classList.toggle("question-countdown-soon", left < 60);
  }

  // A fresher copy of the question (rehydrated after a reconnect).
  refresh(selection) {
    this.selection = { ...this.selection, expires_at: selection.expires_at };
    if (selection.status !== "pending") this.resolve(selection);
  }

  resolve({ status, answer, answered_by: by, answered_via: via }) {
    if (this.status !== "pending" || !status || status === "pending") return;
    this.status = status;
    this.element.dataset.status = status;
    // Whoever was working in the widget keeps their place: on its outcome.
    const hadFocus = this.element.contains(document.activeElement);
    if (this.form) this.form.remove();
    this.element.querySelector(".question-waiting")?.remove();
    this.countdown.textContent = "";
    this.error.hidden = true;
    let text = OUTCOME_WORDS[status] || status;
    if (by) text += ` by ${personName(by)}`;
    if (by && VIA_WORDS[via]) text += ` ${VIA_WORDS[via]}`;
    if (status === "answered") text += `: ${describeAnswer(this.selection, answer)}`;
    if (status === "expired") text += ": nobody answered in time";
    this.outcome.textContent = text;
    this.outcome.hidden = false;
    this.draft?.forget();
    if (hadFocus) this.outcome.focus();
    this.onResolve?.(this);
  }

  // Send this person's reply (an answer, or a dismiss or decline action). Resolves to
  // { settled, mine, error }: settled once the question no longer waits, mine if by this reply,
  // error (the server's words) if it was refused and still waits.
  async reply(body) {
    const focused = document.activeElement;
    const fromCard = this.element.contains(focused);
    const outcome = { settled: false, mine: false, error: null };
    this.replying = true;
    this.setBusy(true);
    this.error.hidden = true;
    try {
      const settled = await api(`/selections/${encodeURIComponent(this.selection.id)}/reply/`, {
        method: "POST",
        body,
      });
      this.resolve(settled);
      outcome.mine = true;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.code === "already_resolved") {
        // Someone else answered first: show their answer, not an error.
        this.resolve(error.details);
      } else if (error.code === "selection_expired") {
        this.resolve({ status: "expired" });
      } else {
        this.showError(error.message);
        outcome.error = error.message;
      }
    } finally {
      this.replying = false;
      this.setBusy(false);
      outcome.settled = this.status !== "pending";
      // Disabling the control that was pressed took the focus away: give it back while the
      // question waits; once this person's reply settled it, move on (afterReply); if someone
      // else's answer won, show theirs. Unless the person has moved on while the reply was on
      // its way (the next question can come over the socket first): their focus stays put.
      const active = document.activeElement;
      const movedOn = active && active !== document.body && !this.element.contains(active);
      if (fromCard && !movedOn) {
        if (!outcome.settled) focused.focus();
        else if (outcome.mine && this.afterReply) this.afterReply(this);
        else this.outcome.focus();
      }
    }
    return outcome;
  }

  showError(message) {
    this.error.textContent = message;
    this.error.hidden = false;
  }

  setBusy(busy) {
    if (!this.form) return;
    this.element.setAttribute("aria-busy", busy ? "true" : "false");
    for (const control of this.form.querySelectorAll("button, input, select, textarea")) {
      control.disabled = busy;
    }
  }

  // The form: the kind's controls, then Dismiss. -----------------------------------------

  buildForm() {
    const form = h("form", { class: "question-form", novalidate: true });
    form.addEventListener("input", () => {
      this.error.hidden = true;
    });
    const actions = h("div", { class: "question-actions" });
    const submitWith = (label, collect) => {
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const answer = collect();
        if (answer !== undefined) this.reply({ answer });
      });
      actions.append(h("button", { type: "submit", class: "primary" }, label));
    };
    const builders = {
      choice: () => this.buildChoice(form, submitWith),
      text: () => this.buildText(form, submitWith),
      confirm: () => this.buildConfirm(actions),
      form: () => this.buildSchemaForm(form, submitWith),
      path: () => this.buildPath(form, submitWith),
    };
    builders[this.selection.kind]();
    actions.append(
      h(
        "button",
        { type: "button", class: "quiet", onclick: () => this.reply({ action: "dismiss" }) },
        "Dismiss",
      ),
    );
    form.append(actions);
    return form;
  }

  buildChoice(form, submitWith) {
    const { options, multiple, allow_freeform: freeform } = this.selection;
    if (!multiple) {
      const group = h("div", { class: "options", role: "group", "aria-labelledby": this.promptId });
      for (const option of options) {
        const descriptionId = option.description ? uniqueId("option-description") : null;
        group.append(
          h(
            "button",
            {
              type: "button",
              class: "option",
              "aria-describedby": descriptionId,
              onclick: () => this.reply({ answer: option.value }),
            },
            inlineMarkdown("span", { class: "option-label" }, option.label, { links: false }),
            option.description
              ? inlineMarkdown("span", { class: "option-description", id: descriptionId }, option.description, {
                  links: false,
                })
              : null,
          ),
        );
      }
      form.append(group);
      if (freeform) {
        const input = this.labelledInput(form, "Or type your own answer", "text");
        submitWith("Send", () => this.required(input.value.trim(), "Type an answer first."));
      }
      return;
    }
    const low = this.selection.min_choices ?? 0;
    const high = this.selection.max_choices ?? options.length;
    const hintId = uniqueId("choice-hint");
    const fieldset = h(
      "fieldset",
      { class: "options options-multiple", "aria-describedby": hintId },
      h("legend", { class: "visually-hidden" }, this.promptText),
    );
    for (const option of options) {
      const id = uniqueId("choice");
      const descriptionId = option.description ? uniqueId("option-description") : null;
      fieldset.append(
        h(
          "div",
          { class: "check-row" },
          h("input", { type: "checkbox", id, value: option.value, "aria-describedby": descriptionId }),
          h(
            "label",
            { for: id },
            inlineMarkdown("span", { class: "option-label" }, option.label),
            option.description
              ? inlineMarkdown("span", { class: "option-description", id: descriptionId }, option.description)
              : null,
          ),
        ),
      );
    }
    const hint = low === high ? `Choose ${low}.` : `Choose ${low || "any number"} to ${high}.`;
    fieldset.append(h("p", { class: "muted question-hint", id: hintId }, hint));
    form.append(fieldset);
    const other = freeform ? this.labelledInput(form, "Something else (optional)", "text") : null;
    submitWith("Send", () => {
      const chosen = [...fieldset.querySelectorAll("input:checked")].map((input) => input.value);
      if (other && other.value.trim()) chosen.push(other.value.trim());
      if (chosen.length < low || chosen.length > high) {
        this.showError(hint);
        return undefined;
      }
      return chosen;
    });
  }

  // The same keys as the composer's (see drafts.js), said under the box; what is typed is kept
  // as a draft until the question is settled.
  buildText(form, submitWith) {
    const id = uniqueId("text-answer");
    const hintId = uniqueId("text-hint");
    const area = h("textarea", { id, rows: 3, maxlength: 10000, "aria-describedby": hintId });
    sendOnEnter(area, () => form.requestSubmit());
    const hint = h("p", { class: "muted question-hint", id: hintId }, ENTER_RULE);
    form.append(h("label", { for: id }, "Your answer"), area, hint);
    if ((this.selection.status || "pending") === "pending") {
      this.draft = new Draft(area, { me: this.me, place: `question:${this.selection.id}` });
    }
    submitWith("Send answer", () => this.required(area.value.trim(), "Type an answer first."));
  }

  buildConfirm(actions) {
    actions.append(
      h("button", { type: "button", class: "primary", onclick: () => this.reply({ answer: true }) }, "Confirm"),
      h("button", { type: "button", onclick: () => this.reply({ action: "decline" }) }, "Decline"),
    );
  }

  buildSchemaForm(form, submitWith) {
    const schema = this.selection.schema || { properties: {} };
    const required = new Set(schema.required || []);
    const fields = [];
    for (const [name, field] of Object.entries(schema.properties)) {
      const id = uniqueId(`field-${name}`);
      const hintId = field.description ? uniqueId("field-hint") : null;
      const title = field.title || name;
      const label = h(
        "label",
        { for: id },
        title,
        required.has(name) ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null,
      );
      let control;
      if (field.type === "boolean") {
        control = h("input", { type: "checkbox", id, "aria-describedby": hintId });
        control.checked = Boolean(field.default);
        form.append(h("div", { class: "check-row" }, control, label));
      } else if (field.enum) {
        control = h("select", { id, required: required.has(name), "aria-describedby": hintId });
        if (!required.has(name)) control.append(h("option", { value: "" }, "—"));
        field.enum.forEach((value, index) => {
          const shown = (field.enumNames && field.enumNames[index]) || value;
          control.append(h("option", { value, selected: field.default === value }, shown));
        });
        form.append(label, control);
      } else {
        const types = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
        const numeric = field.type === "number" || field.type === "integer";
        control = h("input", {
          id,
          type: numeric ? "number" : types[field.format] || "text",
          step: field.type === "integer" ? 1 : numeric ? "any" : null,
          min: field.minimum,
          max: field.maximum,
          maxlength: field.maxLength,
          required: required.has(name),
          "aria-describedby": hintId,
        });
        if (field.default !== undefined) control.value = String(field.default);
        form.append(label, control);
      }
      if (field.description) form.append(h("p", { class: "muted field-hint", id: hintId }, field.description));
      fields.push({ name, field, control });
    }
    submitWith("Send", () => {
      const answer = {};
      for (const { name, field, control } of fields) {
        if (field.type === "boolean") {
          answer[name] = control.checked;
          continue;
        }
        if (control.validity && control.validity.badInput) {
          this.showError(`${field.title || name} must be a number.`);
          control.focus();
          return undefined;
        }
        const raw = control.value.trim();
        if (raw === "") {
          if (required.has(name)) {
            this.showError(`${field.title || name} is required.`);
            control.focus();
            return undefined;
          }
          continue;
        }
        if (field.type === "integer" || field.type === "number") answer[name] = Number(raw);
        // A date-time input gives local time without a zone; the schema wants RFC 3339.
        else if (field.format === "date-time") answer[name] = new Date(raw).toISOString();
        else answer[name] = raw;
      }
      return answer;
    });
  }

  buildPath(form, submitWith) {
    this.picker = new PathPicker(this);
    form.append(this.picker.element);
    submitWith("Choose", () => {
      const picked = this.picker.picked();
      return picked === null ? this.required("", "Pick one first.") : picked;
    });
  }

  labelledInput(form, text, type) {
    const id = uniqueId("input");
    const input = h("input", { id, type, maxlength: 10000 });
    form.append(h("label", { for: id }, text), input);
    return input;
  }

  required(value, message) {
    if (value) return value;
    this.showError(message);
    return undefined;
  }
}

// Browses the question's folder through the browse endpoint: breadcrumbs, folders first, only
// what the question's mode lets a person pick.
class PathPicker {
  constructor(card) {
    this.card = card;
    this.selection = card.selection;
    this.group = uniqueId("pick");
    this.crumbs = h("ol", { class: "picker-crumbs" });
    this.list = h("ul", { class: "picker-list", "aria-label": "Files and folders" });
    this.element = h(
      "div",
      { class: "picker" },
      h("nav", { "aria-label": "Folder" }, this.crumbs),
      this.list,
    );
    this.opened = false;
    this.requests = 0;
  }

  picked() {
    const checked = this.list.querySelector(`input[name="${this.group}"]:checked`);
    return checked ? checked.value : null;
  }

  async open(path) {
    this.opened = true;
    const request = ++this.requests;
    const hadFocus = this.element.contains(document.activeElement);
    this.list.setAttribute("aria-busy", "true");
    let listing;
    try {
      const query = path ? `?path=${encodeURIComponent(path)}` : "";
      listing = await api(`/selections/${encodeURIComponent(this.selection.id)}/browse/${query}`);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (request !== this.requests) return;
      this.list.removeAttribute("aria-busy");
      // A settled question is shown as settled by its event; anything else is worth saying.
      if (error.status !== 409 && error.status !== 410) this.card.showError(error.message);
      return;
    }
    if (request !== this.requests) return; // a later click asked for another folder
    this.list.removeAttribute("aria-busy");
    this.render(listing);
    // Opening a folder replaced the row that had the focus: keep the person in the picker.
    if (hadFocus) (this.list.querySelector("input, button") || this.crumbs.querySelector("span"))?.focus();
  }

  render(listing) {
    const rootName = this.selection.root || "Files";
    const parts = listing.path ? listing.path.split("/") : [];
    this.crumbs.replaceChildren(
      ...[rootName, ...parts].map((name, index) => {
        const target = parts.slice(0, index).join("/");
        const here = index === parts.length;
        return h(
          "li",
          {},
          here
            ? h("span", { "aria-current": "location", tabindex: "-1" }, name)
            : h("button", { type: "button", class: "link-button", onclick: () => this.open(target) }, name),
        );
      }),
    );
    const rows = [];
    if (this.selection.mode !== "file") {
      rows.push(
        this.choiceRow(listing.path || ".", `This folder (${parts.at(-1) || rootName})`, { icon: "folder-open" }),
      );
    }
    for (const entry of listing.entries) {
      if (entry.kind === "folder") {
        const open = h(
          "button",
          {
            type: "button",
            class: "picker-open",
            "aria-label": `Open folder ${entry.name}`,
            onclick: () => this.open(entry.path),
          },
          h("span", { class: "icon icon-folder", "aria-hidden": "true" }),
          entry.name,
        );
        rows.push(
          entry.selectable
            ? this.choiceRow(entry.path, `Pick ${entry.name}`, { open })
            : h("li", { class: "picker-row" }, open),
        );
      } else if (entry.selectable) {
        rows.push(this.choiceRow(entry.path, entry.name, { icon: "file", size: entry.size }));
      }
    }
    if (!listing.entries.length) rows.push(h("li", { class: "picker-row muted" }, "This folder is empty."));
    this.list.replaceChildren(...rows);
  }

  // A row a person can pick: a radio labelled with the name (an icon and size beside it), and
  // for a folder the button that opens it (the radio's label is then read, not shown). A
  // double-click anywhere on a row shown by its label picks it, as in a file dialog (on a
  // folder's row, a click opens the folder instead).
  choiceRow(value, text, { icon = null, size = null, open = null } = {}) {
    const id = uniqueId("pick-option");
    const input = h("input", { type: "radio", name: this.group, id, value });
    const label = h(
      "label",
      { for: id, class: open ? "visually-hidden" : null },
      icon ? h("span", { class: `icon icon-${icon}`, "aria-hidden": "true" }) : null,
      text,
      size !== null ? h("span", { class: "muted picker-size" }, formatBytes(size)) : null,
    );
    const row = h("li", { class: open ? "picker-row" : "picker-row picker-row-pickable" }, input, label, open);
    row.addEventListener("dblclick", (event) => {
      if (open && open.contains(event.target)) return;
      input.checked = true;
      this.card.form.requestSubmit();
    });
    return row;
  }
}
