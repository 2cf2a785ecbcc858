// A path question's picker: browses the question's folder, a folder at a time.

import { ApiError, api } from "./api.js";
import { formatBytes, h, uniqueId } from "./dom.js";

// Browses the question's folder through the browse endpoint: breadcrumbs, folders first, only
// what the question's mode lets a person pick.
export class PathPicker {
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
