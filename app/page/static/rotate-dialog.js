// The rotate dialog: a new key for an old one, with a grace period and an expiry no later
// than the key in use's.

import { api, keyPath, Refusal } from "./api.js";
import { expiryOf, expiryRule, Fields, localInput, report, showDialog } from "./dialogs.js";
import { $, when } from "./dom.js";
import { loadPage } from "./keys.js";
import { adopt, readKeyInUse } from "./signin.js";
import { showCreated } from "./new-key.js";
import { selfEnds, session, storeKey } from "./session.js";

const rotation = {
  key: null,
  // What the API gives the new key when the body names no expiry: the old key's, when it
  // is still ahead, and never later than the key in use's (a time-limited key never
  // becomes permanent by a rotation, nor outlives the key that made it).
  inherited: null,
  grace: $("rotate-grace"),
  expires: $("rotate-expires"),
};
rotation.fields = new Fields($("rotate-error"), {
  grace_seconds: {
    label: "Grace period (seconds)",
    message: $("rotate-grace-error"),
    inputs: () => [rotation.grace],
  },
  expires_at: {
    label: "Expires",
    message: $("rotate-expires-error"),
    inputs: () => [rotation.expires],
  },
});

export function openRotate(key, opener) {
  rotation.key = key;
  const ahead = [key.expires_at, session.self.expires_at].filter(
    (iso) => iso && new Date(iso) > new Date(),
  );
  rotation.inherited = ahead.sort((a, b) => new Date(a) - new Date(b))[0] || null;
  $("rotate-name").textContent = key.name;
  $("rotate-shown").textContent = key.key;
  rotation.grace.value = "0";
  rotation.expires.value = rotation.expires.dataset.shown = localInput(rotation.inherited);
  const ends = selfEnds();
  expiryRule(
    rotation.expires,
    ends
      ? `The key in use expires ${ends}: the new key can expire no later (empty: as first shown).`
      : "Empty: never.",
    !ends,
  );
  sayNewExpiry();
  rotation.fields.clear();
  showDialog($("rotate-dialog"), opener);
  rotation.grace.focus();
}

/** Whether the Expires input names the new key's expiry: changed, and not emptied where the
 * key in use expires (then empty means as first shown: none would be refused). */
function expiryNamed() {
  const expires = rotation.expires;
  const changed = expires.value !== expires.dataset.shown || expires.validity.badInput;
  return changed && (expires.value !== "" || !session.self.expires_at);
}

/** The new key's expiry, as the Expires input will make it: unnamed, the inherited one. */
function sayNewExpiry() {
  const expires = rotation.expires;
  const iso = expiryNamed()
    ? expires.value && new Date(expires.value).toISOString()
    : rotation.inherited;
  $("rotate-expiry").textContent = iso
    ? `The new key expires ${when.format(new Date(iso))}.`
    : "The new key does not expire.";
}

rotation.expires.addEventListener("input", sayNewExpiry);

$("rotate-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const button = $("rotate-confirm");
  const grace = rotation.grace;
  button.disabled = true;
  let answer;
  try {
    if (grace.value === "" || grace.validity.badInput) {
      throw Refusal.invalid({
        grace_seconds: ["Give a number of seconds: 0 ends the old key at once."],
      });
    }
    const body = { grace_seconds: Number(grace.value) };
    // Sent when changed (null: never); unchanged, the API gives the inherited expiry to
    // the second, where the input holds only minutes.
    if (expiryNamed()) {
      body.expires_at = expiryOf(rotation.expires);
    }
    answer = await api("POST", `${keyPath(rotation.key.key)}/rotate`, body);
  } catch (error) {
    report(rotation.fields, error);
    return;
  } finally {
    button.disabled = false;
  }
  $("rotate-dialog").close();
  if (rotation.key.key === session.self.key) {
    // The key in use was replaced: the page goes on with its replacement.
    storeKey(answer.key);
    try {
      adopt(await readKeyInUse());
    } catch (error) {
      report(new Fields($("list-error")), error);
    }
  }
  showCreated(answer.key, "Key rotated");
  if (session.self) {
    await loadPage();
  }
});
