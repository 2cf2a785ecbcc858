// Half-written text kept in this browser, per person and per conversation (or per question):
// it survives a reload, shows in every tab of the same browser (as another tab types, and when
// a tab comes back into view), and goes, in every tab, once it is sent.

const PREFIX = "parley:draft";

function storage() {
  try {
    return window.localStorage;
  } catch {
    return null; // storage refused (a privacy setting): drafts are not kept
  }
}

export class Draft {
  // `field`: a textarea or input; `me`: the person ({ id }); `place`: what the text is for, such
  // as `conversation:c_1` or `question:s_1`. `onChange` runs when another tab changed the text.
  constructor(field, { me, place, onChange = () => {} }) {
    this.field = field;
    this.key = `${PREFIX}:${me.id}:${place}`;
    this.onChange = onChange;
    // The text as last stored (or read) here: what another tab's news may replace.
    this.kept = "";
    this.store = storage();
    if (!this.store) return;
    this.listening = new AbortController();
    const options = { signal: this.listening.signal };
    this.restore();
    field.addEventListener("input", () => this.save(), options);
    window.addEventListener(
      "storage",
      (event) => {
        if (event.key === this.key) this.show(event.newValue || "");
      },
      options,
    );
    // A storage event can be missed (a tab frozen in the background): read again on return.
    const again = () => {
      if (document.visibilityState === "visible") this.restore();
    };
    document.addEventListener("visibilitychange", again, options);
    window.addEventListener("focus", again, options);
  }

  // What is stored, unless this tab holds text that could not be stored (storage full).
  restore() {
    const text = this.store.getItem(this.key) || "";
    if (text || this.field.value === this.kept) this.show(text);
  }

  show(text) {
    this.kept = text;
    if (this.field.value === text) return;
    this.field.value = text;
    this.onChange(text);
  }

  save() {
    if (!this.store) return;
    const text = this.field.value;
    try {
      if (text.trim()) this.store.setItem(this.key, text);
      else this.store.removeItem(this.key);
      this.kept = text;
    } catch {
      // Storage full: the text stays in the box, only not kept.
    }
  }

  // Sent: the text goes, here and in every other tab.
  clear() {
    this.field.value = "";
    this.save();
  }

  // The question was settled: its draft is of no more use (the box itself is gone).
  forget() {
    this.listening?.abort();
    this.store?.removeItem(this.key);
  }
}

// The drafts of questions no longer waiting (settled while no page of theirs was open to see
// it): every `question:<id>` draft of this person whose id is not among `pending`, the ids of
// every question they may still answer.
export function forgetSettledQuestionDrafts(me, pending) {
  const store = storage();
  if (!store) return;
  const prefix = `${PREFIX}:${me.id}:question:`;
  const waiting = new Set(pending);
  for (const key of Object.keys(store)) {
    if (key.startsWith(prefix) && !waiting.has(key.slice(prefix.length))) store.removeItem(key);
  }
}

// Signing out: every draft kept in this browser goes, so that the next person to use it finds
// none of them (a shared computer).
export function forgetAllDrafts() {
  const store = storage();
  if (!store) return;
  for (const key of Object.keys(store)) {
    if (key.startsWith(`${PREFIX}:`)) store.removeItem(key);
  }
}

// The one keyboard rule of every box that sends text (the composer, a text question's box, on
// a conversation's page and on "Waiting for you"): Enter sends, Shift+Enter starts a new line
// (Ctrl+Enter and ⌘+Enter send too). `send` is called once per press, not for a held key.
export const ENTER_RULE = "Enter sends, Shift+Enter starts a new line.";

export function sendOnEnter(field, send) {
  field.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.altKey || event.isComposing) return;
    event.preventDefault();
    if (!event.repeat) send();
  });
}
