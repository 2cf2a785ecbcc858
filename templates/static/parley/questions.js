// Questions the agent asks mid-turn, shown where it asked them: one widget per kind, a countdown
// to expiry, Dismiss, and (once anyone answers, from anywhere) the outcome and who gave it.

import { ApiError, api } from "./api.js";
import { deliveriesDisclosure } from "./deliveries.js";
import { Draft, ENTER_RULE, sendOnEnter } from "./drafts.js";
import { h, personName, timeElement, uniqueId } from "./dom.js";
import { PathPicker } from "./picker.js";
import {
  OUTCOME_WORDS,
  VIA_WORDS,
  countdownText,
  describeAnswer,
  formFieldNames,
  inlineMarkdown,
  kindWords,
  plainText,
} from "./question-words.js";

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
    for (const name of formFieldNames(this.selection)) {
      const field = schema.properties[name];
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
