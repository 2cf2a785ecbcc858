// Pages a signed link opens (an email change's confirmation, a password reset): the link's
// signature is in the address's fragment (#k=…), which the browser never sends to any server.
// This script copies the fragment's values into the page's form (the inputs of the same names),
// which the person then submits; it takes the fragment off the address bar and history. An input
// the server filled (an invitation kept in the session while its person signed in) keeps its
// value when the fragment has none.

const params = new URLSearchParams(window.location.hash.slice(1));
for (const form of document.querySelectorAll("form[data-link-form]")) {
  const inputs = [...form.querySelectorAll('input[type="hidden"]:not([name="csrfmiddlewaretoken"])')];
  let whole = true;
  for (const input of inputs) {
    input.value = params.get(input.name) || input.value;
    whole = whole && input.value !== "";
  }
  if (!whole) {
    form.querySelector("[data-link-missing]").hidden = false;
    form.querySelector('button[type="submit"]').disabled = true;
  }
}
if (window.location.hash) {
  history.replaceState(null, "", window.location.pathname + window.location.search);
}
