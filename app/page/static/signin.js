// The key in use: pasted, judged, learnt from the API, forgotten. What was pasted is judged
// in people's words: its shape (and checksum) here, before it is sent anywhere; a
// well-formed key by the API's answer.

import { api, keyPath, onUnauthorized, Refusal } from "./api.js";
import { closeAudit, offerAudit } from "./audit.js";
import { closeWebhooks, offerWebhooks } from "./webhooks.js";
import { closeIdentities, offerIdentities } from "./identities.js";
import { closeImport, offerImport } from "./import-keys.js";
import { $ } from "./dom.js";
import { clearList, loadPage } from "./keys.js";
import { forgetKey, session, storedKey, storeKey } from "./session.js";
import { closeUsage } from "./usage.js";

// A key's shape (app/domain/keyformat.py, written into the page's data attributes):
// <identifier><secret><checksum>, the checksum the CRC-32 of what comes before it in base62.
const shape = document.body.dataset;
const ALPHABET = shape.alphabet;
const TAIL_LENGTH = Number(shape.tailLength);
const CHECKSUM_LENGTH = Number(shape.checksumLength);
const [SHORTEST, LONGEST] = shape.identifierLengths.split(" ").map(Number);
const FULL_KEY = new RegExp(`^[A-Za-z0-9_]{${SHORTEST + TAIL_LENGTH},${LONGEST + TAIL_LENGTH}}$`);
const suffix = shape.shownSuffix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
// The shown form, also as a word processor may have rewritten its dots (…).
const SHOWN = new RegExp(`^[A-Za-z0-9_]{${SHORTEST},${LONGEST}}(?:${suffix}|\u2026)$`);

const CRC_TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte;
  for (let bit = 0; bit < 8; bit++) {
    crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1;
  }
  return crc >>> 0;
});

/** zlib's CRC-32 of an ASCII string. */
function crc32(text) {
  let crc = 0xffffffff;
  for (let index = 0; index < text.length; index++) {
    crc = CRC_TABLE[(crc ^ text.charCodeAt(index)) & 0xff] ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function base62(number, width) {
  let digits = "";
  for (let place = 0; place < width; place++) {
    digits = ALPHABET[number % 62] + digits;
    number = Math.floor(number / 62);
  }
  return digits;
}

/** What is wrong with a pasted value, in people's words; null: it has a key's shape. */
function pastedProblem(value) {
  if (!value) {
    return "Paste a key first.";
  }
  if (SHOWN.test(value)) {
    return (
      "This is the shown form of a key: paste the full key (it was shown once, when the " +
      "key was made)."
    );
  }
  const body = value.slice(0, -CHECKSUM_LENGTH);
  if (!FULL_KEY.test(value) || base62(crc32(body), CHECKSUM_LENGTH) !== value.slice(body.length)) {
    return "This is not a whole API key: check that you pasted all of it.";
  }
  return null;
}

/** Why the API refused the key in use (401), in people's words. */
function refusedKey(refusal) {
  if (refusal.code === "expired_key") {
    return "This key has expired: paste another key.";
  }
  if (refusal.code === "disabled_key") {
    return "This key is disabled: another key can enable it again.";
  }
  return "This key is unknown or was deleted.";
}

/** Say `message` at the key input (marked invalid when it is about a key it was given). */
function say(message, invalid) {
  const region = $("sign-in-error");
  region.replaceChildren();
  if (message) {
    const said = document.createElement("p");
    said.textContent = message;
    region.append(said);
  }
  if (invalid) {
    $("api-key").setAttribute("aria-invalid", "true");
  } else {
    $("api-key").removeAttribute("aria-invalid");
  }
}

/** Back to the key input, saying `message` (if any). */
export function signOut(message, invalid = false) {
  forgetKey();
  session.self = null;
  // A new key on screen stays there: it is shown once.
  for (const dialog of document.querySelectorAll("dialog[open]:not(#created-dialog)")) {
    dialog.close();
  }
  $("keys").hidden = true;
  closeAudit();
  closeWebhooks();
  closeIdentities();
  closeImport();
  closeUsage();
  $("in-use").hidden = true;
  clearList();
  $("sign-in").hidden = false;
  say(message, invalid);
  $("api-key").focus();
}

onUnauthorized((refusal) => signOut(refusedKey(refusal), true));

/** What the page knows of the key in use: its name and shown value, scopes and expiry. */
export function adopt(inUse) {
  session.self = inUse;
  $("in-use-name").textContent = inUse.name;
  $("in-use-key").textContent = inUse.key;
  offerAudit();
  offerWebhooks();
  offerIdentities();
  offerImport();
}

/** The key in use as the API shows it, read by its public identifier alone. */
export function readKeyInUse() {
  return api("GET", keyPath(storedKey().slice(0, -TAIL_LENGTH)));
}

/** Learn the key in use (its scopes), then show the list. */
async function useStoredKey() {
  let inUse;
  try {
    inUse = await readKeyInUse();
  } catch (error) {
    if (!(error instanceof Refusal)) {
      throw error;
    }
    if (error.status !== 401) {
      // A telemetry key (403), or no answer: nothing on this page would work with it.
      signOut(error.message, error.status !== 0);
    }
    return;
  }
  adopt(inUse);
  $("in-use").hidden = false;
  $("sign-in").hidden = true;
  say(null, false);
  $("keys").hidden = false;
  if (await loadPage()) {
    $("keys-title").focus();
  }
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("api-key");
  const key = input.value.trim();
  input.value = "";
  const problem = pastedProblem(key);
  if (problem) {
    say(problem, Boolean(key));
    input.focus();
    return;
  }
  storeKey(key);
  useStoredKey();
});

$("forget").addEventListener("click", () => signOut(null));

/** The start: the key this tab already holds, or the key input. */
export function start() {
  if (storedKey()) {
    useStoredKey();
  } else {
    $("api-key").focus();
  }
}
