// A permalink to an event (`/conversations/<id>/?seq=<n>`, as search results link): once the
// conversation page has drawn its history, earlier parts are loaded (with the page's own "Show
// earlier messages") until the event is shown; then it is scrolled into view and highlighted.
// The entry shown for an event is the last one placed at or before its seq (an answer is shown
// on its question's card, a message from its first piece).

const target = Number(new URLSearchParams(window.location.search).get("seq"));
const transcript = document.getElementById("transcript");
const earlier = document.getElementById("transcript-earlier");
const earlierButton = document.getElementById("load-earlier");

function entryFor(seq) {
  let best = null;
  for (const element of transcript.querySelectorAll("[data-seq]")) {
    const at = Number(element.dataset.seq);
    if (at <= seq && (!best || at > Number(best.dataset.seq))) best = element;
  }
  return best;
}

function land(entry) {
  entry.classList.add("permalink-target");
  entry.setAttribute("tabindex", "-1");
  // After the page's own first scroll to the latest (it happens on the next frame).
  requestAnimationFrame(() =>
    requestAnimationFrame(() => {
      entry.scrollIntoView({ block: "center" });
      entry.focus({ preventScroll: true });
    }),
  );
}

let landed = false;

function look(observer) {
  if (landed || !transcript.querySelector("[data-seq]")) return;
  const first = Number(transcript.querySelector("[data-seq]").dataset.seq);
  if (first > target && !earlier.hidden) {
    // Not drawn yet: read the earlier part (the page keeps the reader's place as it does).
    if (!earlierButton.disabled) earlierButton.click();
    return;
  }
  landed = true;
  observer.disconnect();
  const entry = entryFor(target);
  if (entry) land(entry);
}

if (Number.isSafeInteger(target) && target > 0 && transcript) {
  const observer = new MutationObserver(() => look(observer));
  observer.observe(transcript, { childList: true, subtree: true });
  // "Show earlier messages" showing again (or not) is news too.
  new MutationObserver(() => look(observer)).observe(earlier, { attributes: true });
  look(observer);
}
