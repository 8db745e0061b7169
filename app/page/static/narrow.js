// Narrow scopes (docs/design.md, "The page"): from a key's usage, Edit with the scopes no check
// named unchecked; saved, back to the key's usage, which says what changed. A module of its
// own, so that the usage view and the key dialogs do not import each other (the page's
// modules import in one direction: tests/test_page_modules.py checks there is no cycle).

import { $ } from "./dom.js";
import { openEdit } from "./key-dialogs.js";
import { openUsage, shownUsage } from "./usage.js";

/** What a save did to the scopes, in a few words. */
function changeWords(before, after) {
  const was = before.scopes.join(" ");
  if (after.scopes.join(" ") === was) {
    return "Scopes unchanged.";
  }
  const narrowed = after.scopes.every((scope) => before.scopes.includes(scope));
  return `Scopes ${narrowed ? "narrowed" : "changed"} to ${after.scopes.join(", ")}.`;
}

$("narrow-scopes").addEventListener("click", (event) => {
  const { key, unused, opener } = shownUsage();
  openEdit(key, event.currentTarget, unused, (saved) =>
    openUsage(saved, opener, changeWords(key, saved)),
  );
});
