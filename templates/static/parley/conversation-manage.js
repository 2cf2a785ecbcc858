// Managing a conversation itself, through the REST API: rename it in place, archive or unarchive
// it, delete it once a <dialog> has asked. The home list (home.js) uses these pieces; on a
// conversation's page this module also runs the header's controls, shown to those the API says
// may use them.

import { ApiError, api } from "./api.js";
import { h, uniqueId } from "./dom.js";

const path = (id) => `/conversations/${encodeURIComponent(id)}/`;

export function renameConversation(id, title) {
  return api(path(id), { method: "PATCH", body: { title } });
}

export function setArchived(id, archived) {
  return api(path(id), { method: "PATCH", body: { archived } });
}

export function deleteConversation(id) {
  return api(path(id), { method: "DELETE" });
}

// Where a deleted conversation's title waits for the home page to announce it.
export const DELETED_KEY = "parley:deleted";

function errorText(error) {
  return error instanceof ApiError ? error.message : "Something went wrong. Try again.";
}

// Edit a title in place of `shown` (hidden meanwhile): Enter or Save saves it through `save`
// (which returns a promise), Escape or Cancel gives up. A refusal is shown beside the box,
// which stays open. `done(result)` runs after a save (result: what `save` resolved to) or
// after giving up (null).
export function editTitle({ shown, title, save, done = () => {} }) {
  const inputId = uniqueId("title");
  const input = h("input", {
    id: inputId,
    type: "text",
    class: "title-input",
    value: title,
    maxlength: 200,
    required: true,
    autocomplete: "off",
  });
  const error = h("p", { class: "form-error", role: "alert", hidden: true });
  const saveButton = h("button", { type: "submit", class: "primary" }, "Save");
  const cancelButton = h("button", { type: "button" }, "Cancel");
  const form = h(
    "form",
    { class: "title-editor" },
    h("label", { for: inputId, class: "visually-hidden" }, `New title for ${title}`),
    input,
    h("span", { class: "title-editor-actions" }, saveButton, cancelButton),
    error,
  );
  const finish = (result) => {
    form.remove();
    shown.hidden = false;
    done(result);
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const wanted = input.value.trim();
    if (wanted === title) {
      finish(null);
      return;
    }
    saveButton.disabled = cancelButton.disabled = input.readOnly = true;
    error.hidden = true;
    try {
      finish(await save(wanted));
    } catch (refusal) {
      error.textContent = errorText(refusal);
      error.hidden = false;
      saveButton.disabled = cancelButton.disabled = input.readOnly = false;
      input.focus();
    }
  });
  cancelButton.addEventListener("click", () => finish(null));
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      finish(null);
    }
  });
  shown.hidden = true;
  shown.after(form);
  input.focus();
  input.select();
  return form;
}

// Ask before deleting: a modal <dialog> naming the conversation, with Cancel focused (Escape
// cancels too). Resolves true once `remove()` succeeded, false if the person changed their
// mind; a refusal (a turn still running) is shown in the dialog, which stays open.
export function confirmDelete({ title, remove }) {
  return new Promise((resolve) => {
    const headingId = uniqueId("delete-title");
    const error = h("p", { class: "form-error", role: "alert", hidden: true });
    const deleteButton = h("button", { type: "button", class: "danger" }, "Delete");
    const cancelButton = h("button", { type: "button", autofocus: true }, "Cancel");
    const dialog = h(
      "dialog",
      { class: "confirm-dialog", "aria-labelledby": headingId },
      h("h2", { id: headingId }, `Delete “${title}”?`),
      h(
        "p",
        {},
        "Its transcript, turns and questions are deleted for everyone in the workspace. " +
          "This cannot be undone. Archiving it instead hides it and keeps it.",
      ),
      error,
      h("div", { class: "confirm-actions" }, cancelButton, deleteButton),
    );
    let deleted = false;
    let busy = false;
    const opener = document.activeElement;
    // Escape while the deletion is on its way would hide an answer that is coming.
    dialog.addEventListener("cancel", (event) => {
      if (busy) event.preventDefault();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (!deleted && opener && opener.isConnected) opener.focus();
      resolve(deleted);
    });
    cancelButton.addEventListener("click", () => dialog.close());
    deleteButton.addEventListener("click", async () => {
      deleteButton.disabled = cancelButton.disabled = busy = true;
      error.hidden = true;
      try {
        await remove();
        deleted = true;
        busy = false;
        dialog.close();
      } catch (refusal) {
        error.textContent = errorText(refusal);
        error.hidden = false;
        deleteButton.disabled = cancelButton.disabled = busy = false;
        cancelButton.focus();
      }
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// The conversation page's header. ------------------------------------------------------------

function manageHeader(block) {
  const id = block.dataset.conversation;
  const heading = block.querySelector("h1");
  const badge = block.querySelector(".pill-archived");
  const actions = block.querySelector(".conversation-actions");
  const buttons = {
    rename: actions.querySelector('[data-action="rename"]'),
    archive: actions.querySelector('[data-action="archive"]'),
    delete: actions.querySelector('[data-action="delete"]'),
  };
  const status = block.querySelector(".conversation-manage-status");
  let title = heading.textContent;
  let archived = block.dataset.archived === "true";

  function showArchived() {
    badge.hidden = !archived;
    buttons.archive.textContent = archived ? "Unarchive" : "Archive";
  }

  function showTitle(next) {
    const crumb = document.querySelector('.crumbs [aria-current="page"]');
    if (crumb) crumb.textContent = next;
    // Rebuilt as the server writes it (after the waiting count, if any), never by replacing
    // the old title inside it: "$&" in a title is text, not a pattern.
    const counted = document.title.match(/^\(\d+\)\s+/)?.[0] ?? "";
    document.title = `${counted}${next} · ${block.dataset.workspace} · Parley`;
    heading.textContent = next;
    title = next;
  }

  // Renamed by someone else (or in another tab): the sidebar's fresh list says so.
  window.addEventListener("parley:conversations", ({ detail: conversations }) => {
    const mine = conversations.find((conversation) => conversation.id === id);
    if (mine && mine.title !== title && !block.querySelector(".title-editor")) showTitle(mine.title);
  });

  buttons.rename.addEventListener("click", () => {
    actions.hidden = true;
    editTitle({
      shown: heading,
      title,
      save: (wanted) => renameConversation(id, wanted),
      done(result) {
        actions.hidden = false;
        if (result) {
          showTitle(result.title);
          status.textContent = `Renamed to “${result.title}”.`;
        }
        buttons.rename.focus();
      },
    });
  });

  buttons.archive.addEventListener("click", async () => {
    buttons.archive.disabled = true;
    try {
      const result = await setArchived(id, !archived);
      archived = result.archived;
      showArchived();
      status.textContent = archived
        ? "Archived: it is hidden from the home list, and still found by search."
        : "Unarchived: it is back in the home list.";
    } catch (refusal) {
      status.textContent = errorText(refusal);
    } finally {
      buttons.archive.disabled = false;
    }
  });

  buttons.delete.addEventListener("click", async () => {
    const deleted = await confirmDelete({ title, remove: () => deleteConversation(id) });
    if (deleted) {
      sessionStorage.setItem(DELETED_KEY, title);
      window.location.assign("/");
    }
  });

  // Which controls this person may use, from the one place that decides it.
  api(path(id))
    .then((conversation) => {
      archived = conversation.archived;
      showArchived();
      let any = false;
      for (const [name, button] of Object.entries(buttons)) {
        button.hidden = !conversation.permissions[name];
        any ||= !button.hidden;
      }
      actions.hidden = !any;
      block.dataset.permissions = "loaded";
    })
    .catch(() => {
      // Without its permissions the page shows no controls; the rest of the page still works.
      block.dataset.permissions = "unknown";
    });
}

const header = document.querySelector(".conversation-title[data-conversation]");
if (header) manageHeader(header);
