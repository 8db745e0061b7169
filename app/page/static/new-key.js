// The dialog that shows a new key, the only time its full value is shown: it closes only
// when the person says so (Done once the key was copied, or Close when asked), never on a
// stray Escape, and nothing of the key stays in the page after it.

import { showDialog } from "./dialogs.js";
import { $ } from "./dom.js";

const created = { dialog: $("created-dialog"), copied: false };

/** Ask whether to close (the key will not be shown again), or stop asking. */
function asking(ask) {
  $("close-check").hidden = !ask;
  $("created-actions").hidden = ask;
  (ask ? $("keep-open") : $("copy")).focus();
}

/** Show `fullKey` under `title` ("Key created", "Key rotated"): its only showing. */
export function showCreated(fullKey, title) {
  $("created-title").textContent = title;
  $("new-key-value").value = fullKey;
  $("copy-status").textContent = "";
  created.copied = false;
  showDialog(created.dialog, $("new-key"));
  asking(false);
}

created.dialog.addEventListener("close", () => {
  // Shown once: nothing of it stays in the page.
  $("new-key-value").value = "";
});

// Escape asks first (and, asking, goes back to the key); any other request to close too.
created.dialog.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    event.preventDefault(); // no close request: the dialog stays
    asking($("close-check").hidden);
  }
});
created.dialog.addEventListener("cancel", (event) => {
  event.preventDefault();
  asking(true);
});

$("done").addEventListener("click", () => {
  if (created.copied) {
    created.dialog.close();
  } else {
    asking(true);
  }
});
$("close-anyway").addEventListener("click", () => created.dialog.close());
$("keep-open").addEventListener("click", () => asking(false));
$("new-key-value").addEventListener("copy", () => {
  created.copied = true;
});

$("copy").addEventListener("click", async () => {
  const input = $("new-key-value");
  try {
    await navigator.clipboard.writeText(input.value);
    created.copied = true;
    $("copy-status").textContent = "Copied to the clipboard.";
  } catch {
    input.select();
    $("copy-status").textContent = "Selected: press Ctrl+C (or ⌘C) to copy.";
  }
});
