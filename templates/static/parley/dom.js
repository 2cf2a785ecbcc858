// Building DOM from data without ever parsing it as HTML: every string becomes a text node.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

let counter = 0;
export function uniqueId(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

export function personName(person) {
  return person ? person.name || person.username : "someone";
}

export function formatTime(iso) {
  const moment = new Date(iso);
  return Number.isNaN(moment.getTime())
    ? ""
    : moment.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

export function formatBytes(size) {
  if (size === null || size === undefined) return "";
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

// Times on entries --------------------------------------------------------------------------
// Recent ones in words ("just now", "5 min ago"), then the clock time (the day separator above
// says which day); the full date and time on hover. Dates and times in the reader's own format.

const MINUTE = 60 * 1000;

function moment(iso) {
  const value = new Date(iso);
  return Number.isNaN(value.getTime()) ? null : value;
}

export function relativeTime(iso, now = Date.now()) {
  const when = moment(iso);
  if (!when) return "";
  const ago = now - when.getTime();
  if (ago < MINUTE) return "just now";
  if (ago < 60 * MINUTE) return `${Math.floor(ago / MINUTE)} min ago`;
  return formatTime(iso);
}

export function fullTime(iso) {
  const when = moment(iso);
  return when ? when.toLocaleString([], { dateStyle: "full", timeStyle: "medium" }) : "";
}

// A <time> that refreshTimes keeps current.
export function timeElement(iso, now = Date.now()) {
  return h("time", { class: "entry-time", datetime: iso, title: fullTime(iso) }, relativeTime(iso, now));
}

// The local day an instant falls on, as YYYY-MM-DD (a <time>'s datetime for a day).
export function dayKey(iso) {
  const when = moment(iso);
  if (!when) return "";
  const pad = (number) => String(number).padStart(2, "0");
  return `${when.getFullYear()}-${pad(when.getMonth() + 1)}-${pad(when.getDate())}`;
}

// "Today", "Yesterday", else the date ("Friday 21 November", with the year when not this one).
export function dayLabel(key, now = Date.now()) {
  const [year, month, day] = key.split("-").map(Number);
  const that = new Date(year, month - 1, day);
  const today = new Date(now);
  today.setHours(0, 0, 0, 0);
  const days = Math.round((today - that) / (24 * 60 * MINUTE));
  if (days === 0) return "Today";
  if (days === 1) return "Yesterday";
  const options = { weekday: "long", day: "numeric", month: "long" };
  if (year !== today.getFullYear()) options.year = "numeric";
  return that.toLocaleDateString([], options);
}

// Bring every entry time and day separator under `root` up to date.
export function refreshTimes(root, now = Date.now()) {
  for (const time of root.querySelectorAll("time.entry-time")) {
    const text = relativeTime(time.dateTime, now);
    if (time.textContent !== text) time.textContent = text;
  }
  for (const time of root.querySelectorAll("time.day-label")) {
    const text = dayLabel(time.dateTime, now);
    if (time.textContent !== text) time.textContent = text;
  }
}
