// The delete dialog: a key deleted for good; deleting the key in use signs out.

import { api, keyPath } from "./api.js";
import { Fields, report, showDialog } from "./dialogs.js";
import { $ } from "./dom.js";
import { refresh } from "./keys.js";
import { signOut } from "./signin.js";
import { session } from "./session.js";

const deletion = { key: null, fields: new Fields($("delete-error")) };

export function openDelete(key, opener) {
  deletion.key = key;
  const mine = key.key === session.self.key;
  $("delete-self").hidden = !mine;
  $("delete-dialog").setAttribute(
    "aria-describedby",
    mine ? "delete-what delete-self" : "delete-what",
  );
  $("delete-name").textContent = key.name;
  $("delete-shown").textContent = key.key;
  $("delete-identity").textContent = key.identity
    ? `, identity ${key.identity.external_id}`
    : "";
  deletion.fields.clear();
  showDialog($("delete-dialog"), opener);
  $("delete-dialog").querySelector(".cancel").focus();
}

$("delete-confirm").addEventListener("click", async (event) => {
  const button = event.currentTarget;
  const mine = deletion.key.key === session.self.key;
  button.disabled = true;
  try {
    await api("DELETE", keyPath(deletion.key.key));
  } catch (error) {
    report(deletion.fields, error);
    return;
  } finally {
    button.disabled = false;
  }
  $("delete-dialog").close();
  if (mine) {
    // Nothing more can be asked with it: back to the key input, saying why.
    signOut("The key in use was deleted: paste another key to go on.");
  } else {
    await refresh(null);
  }
});
