// The API tokens page: the new key's Copy button.

const button = document.getElementById("token-copy");
if (button) {
  const field = document.getElementById(button.dataset.copy);
  const status = document.getElementById("token-copy-status");
  button.addEventListener("click", async () => {
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      status.textContent = "Copied.";
    } catch {
      status.textContent = "Select the key and copy it (Ctrl+C or ⌘C).";
    }
  });
}
