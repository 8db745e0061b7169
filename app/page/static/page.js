// The page for people: it calls the public REST API (/api/keys) with the key the person
// pasted, as any client does. The key lives in sessionStorage only: never in a cookie,
// localStorage, a URL or the page itself. Every value from the API is written as text
// (textContent), never as HTML.

const STORE = "apiKey";
// The full key minus its secret tail is its public identifier (app/keyformat.py).
const TAIL_LENGTH = Number(document.body.dataset.tailLength);
const API = "api/keys";

const $ = (id) => document.getElementById(id);
const when = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  timeZoneName: "short",
});

const state = {
  self: null, // the key in use, as the API shows it
  page: 1,
  pageSize: 50,
  kind: "",
};

/** An answer of the API that is not a success, or no answer at all. */
class Refusal extends Error {
  constructor(status, problem) {
    const detail =
      problem && typeof problem.detail === "string"
        ? problem.detail
        : status
          ? `The service answered ${status}.`
          : "The service did not answer. Check the connection and try again.";
    super(detail);
    this.status = status;
    this.errors = problem && typeof problem.errors === "object" ? problem.errors : null;
  }
}

/** One call of the API with the key in use. A 401 sends the person back to the key input. */
async function api(method, path, body) {
  const headers = {
    Accept: "application/json",
    Authorization: "Bearer " + (sessionStorage.getItem(STORE) || ""),
  };
  // credentials "omit": the browser adds nothing of its own, and the API's 401 with
  // WWW-Authenticate: Basic reaches this code instead of opening the browser's prompt.
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new Refusal(0, null);
  }
  const problem = response.status === 204 ? null : await response.json().catch(() => null);
  if (response.ok) {
    return problem;
  }
  const refusal = new Refusal(response.status, problem);
  if (response.status === 401) {
    signOut(refusal);
  }
  throw refusal;
}

const keyPath = (shown) => `${API}/${encodeURIComponent(shown)}`;

/** The detail of a refusal (and its field errors) in `region`; empty clears it. */
function showError(region, refusal) {
  region.replaceChildren();
  if (!refusal) {
    return;
  }
  const detail = document.createElement("p");
  detail.textContent = refusal.message;
  region.append(detail);
  if (refusal.errors) {
    const list = document.createElement("ul");
    for (const [field, messages] of Object.entries(refusal.errors)) {
      for (const message of [].concat(messages)) {
        const item = document.createElement("li");
        item.textContent = `${field}: ${message}`;
        list.append(item);
      }
    }
    region.append(list);
  }
}

/** Report a refusal where the person is looking; a 401 was already shown at the key input. */
function report(region, error) {
  if (!(error instanceof Refusal)) {
    throw error;
  }
  if (error.status !== 401) {
    showError(region, error);
  }
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  const role = { tr: "row", td: "cell" }[tag];
  if (role) {
    node.setAttribute("role", role);
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  if (className) {
    node.className = className;
  }
  return node;
}

function timeCell(label, iso, none, past) {
  const cell = element("td");
  cell.dataset.label = label;
  if (!iso) {
    cell.textContent = none;
    return cell;
  }
  const moment = new Date(iso);
  const time = element("time", when.format(moment));
  time.dateTime = iso;
  time.title = iso;
  if (past && moment <= new Date()) {
    cell.append(past + " ");
  }
  cell.append(time);
  return cell;
}

// An expiry in a datetime-local input: the person's own time zone, to the minute.
const pad = (number) => String(number).padStart(2, "0");

function localInput(iso) {
  if (!iso) {
    return "";
  }
  const moment = new Date(iso);
  const day = `${moment.getFullYear()}-${pad(moment.getMonth() + 1)}-${pad(moment.getDate())}`;
  return `${day}T${pad(moment.getHours())}:${pad(moment.getMinutes())}`;
}

/** The input's time for the API (UTC, Z), null when empty; a half-typed time is refused. */
function expiryOf(input) {
  if (input.validity.badInput) {
    throw new Refusal(0, { detail: "Expires: complete the date and time, or leave it empty." });
  }
  return input.value ? new Date(input.value).toISOString() : null;
}

for (const zone of document.querySelectorAll(".zone")) {
  zone.textContent = Intl.DateTimeFormat().resolvedOptions().timeZone;
}

for (const clear of document.querySelectorAll(".no-expiry")) {
  clear.addEventListener("click", () => {
    const input = $(clear.dataset.for);
    input.value = "";
    input.dispatchEvent(new Event("input")); // as if the person had emptied it
    input.focus();
  });
}

// --- the key in use -----------------------------------------------------------------------

function signOut(refusal) {
  sessionStorage.removeItem(STORE);
  // The next key may belong to another organization: its list starts afresh.
  Object.assign(state, { self: null, page: 1, kind: "" });
  $("filter-kind").value = "";
  // A new key on screen stays there: it is shown once.
  for (const dialog of document.querySelectorAll("dialog[open]:not(#created-dialog)")) {
    dialog.close();
  }
  $("keys").hidden = true;
  $("in-use").hidden = true;
  $("rows").replaceChildren();
  $("page-status").textContent = "";
  $("sign-in").hidden = false;
  showError($("sign-in-error"), refusal);
  $("api-key").focus();
}

/** What the page knows of the key in use: its name and shown value, and its scopes. */
function adopt(inUse) {
  state.self = inUse;
  $("in-use-name").textContent = inUse.name;
  $("in-use-key").textContent = inUse.key;
}

/** The key in use as the API shows it, read by its public identifier alone. */
function readKeyInUse() {
  const key = sessionStorage.getItem(STORE);
  const identifier = key.length > TAIL_LENGTH ? key.slice(0, -TAIL_LENGTH) : key;
  return api("GET", keyPath(identifier));
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
      signOut(error);
    }
    return;
  }
  adopt(inUse);
  $("in-use").hidden = false;
  $("sign-in").hidden = true;
  showError($("sign-in-error"), null);
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
  if (!key) {
    showError($("sign-in-error"), new Refusal(0, { detail: "Paste a key first." }));
    input.focus();
    return;
  }
  sessionStorage.setItem(STORE, key);
  useStoredKey();
});

$("forget").addEventListener("click", () => signOut(null));

// --- the list -----------------------------------------------------------------------------

function keyRow(key) {
  const row = element("tr");
  const nameId = `name-${key.key.replace(/[^A-Za-z0-9_-]/g, "")}`;
  const name = element("td");
  name.dataset.label = "Name";
  const title = element("span", key.name, "key-name");
  title.id = nameId;
  const names = element("div");
  names.append(title, element("code", key.key, "shown"));
  name.append(names);
  const kind = element("td", key.kind);
  kind.dataset.label = "Kind";
  const scopes = element("td");
  scopes.dataset.label = "Scopes";
  const list = element("ul", undefined, "scope-list");
  for (const scope of key.scopes) {
    list.append(element("li", scope));
  }
  scopes.append(list);
  const actions = element("td", undefined, "row-actions");
  for (const [label, action] of [
    ["Edit", openEdit],
    ["Rotate", openRotate],
    ["Delete", openDelete],
  ]) {
    const button = element("button", label);
    button.type = "button";
    button.dataset.key = key.key;
    button.dataset.action = label;
    button.setAttribute("aria-describedby", nameId);
    button.addEventListener("click", () => action(key, button));
    actions.append(button);
  }
  row.append(
    name,
    kind,
    scopes,
    timeCell("Last used", key.last_used, "Never"),
    timeCell("Expires", key.expires_at, "Never", "Expired"),
    actions,
  );
  return row;
}

/** Show state.page; false when it could not be read. */
async function loadPage() {
  const query = new URLSearchParams({ page: state.page, page_size: state.pageSize });
  if (state.kind) {
    query.set("kind", state.kind);
  }
  const table = $("key-table");
  table.setAttribute("aria-busy", "true");
  let listing;
  try {
    listing = await api("GET", `${API}?${query}`);
  } catch (error) {
    report($("list-error"), error);
    return false;
  } finally {
    table.removeAttribute("aria-busy");
  }
  const pages = Math.max(1, Math.ceil(listing.total_count / listing.page_size));
  if (listing.data.length === 0 && state.page > pages) {
    // The last keys of the last page were deleted: show the page before.
    state.page = pages;
    return loadPage();
  }
  showError($("list-error"), null);
  const rows = listing.data.map(keyRow);
  if (rows.length === 0) {
    const empty = element("td", state.kind ? `No ${state.kind} keys.` : "No keys.");
    empty.colSpan = 6;
    rows.push(element("tr"));
    rows[0].append(empty);
  }
  $("rows").replaceChildren(...rows);
  const count = `${listing.total_count} ${listing.total_count === 1 ? "key" : "keys"}`;
  $("page-status").textContent = `Page ${state.page} of ${pages} · ${count}`;
  $("previous").disabled = state.page <= 1;
  $("next").disabled = state.page >= pages;
  return true;
}

/** Move to another page, keeping the focus on the control that was used, or the table. */
async function turn(page, control) {
  state.page = page;
  await loadPage();
  (control.disabled ? $("keys-title") : control).focus();
}

$("previous").addEventListener("click", (event) => turn(state.page - 1, event.currentTarget));
$("next").addEventListener("click", (event) => turn(state.page + 1, event.currentTarget));
$("filter-kind").addEventListener("change", (event) => {
  state.kind = event.currentTarget.value;
  state.page = 1;
  loadPage();
});
$("page-size").addEventListener("change", (event) => {
  state.pageSize = Number(event.currentTarget.value);
  state.page = 1;
  loadPage();
});

/** After a change: the list again, and the focus on what `focus` selects, or New key. */
async function refresh(focus) {
  if (await loadPage()) {
    ((focus && document.querySelector(focus)) || $("new-key")).focus();
  }
}

// --- dialogs ------------------------------------------------------------------------------

for (const dialog of document.querySelectorAll("dialog")) {
  for (const cancel of dialog.querySelectorAll(".cancel")) {
    cancel.addEventListener("click", () => dialog.close());
  }
}

/** Open a dialog; when it closes, the focus returns to `opener` if it is still there. */
function showDialog(dialog, opener) {
  dialog.addEventListener(
    "close",
    () => {
      if (document.querySelector("dialog[open]")) {
        return;
      }
      if ($("keys").hidden) {
        $("api-key").focus();
      } else if (opener && opener.isConnected) {
        opener.focus();
      }
    },
    { once: true },
  );
  dialog.showModal();
}

// One form creates and edits: the same inputs, offering only the scopes of the key in use.
const form = {
  dialog: $("key-dialog"),
  name: $("key-name"),
  kind: $("key-kind"),
  expires: $("key-expires"),
  boxes: $("scope-boxes"),
  note: $("scopes-note"),
  error: $("key-dialog-error"),
  submit: $("key-dialog-submit"),
  editing: null, // the key being edited; null when creating
  expiresShown: "", // what the Expires input showed when the form opened
};

function scopeBoxes(checked) {
  const boxes = state.self.scopes.map((scope) => {
    const label = element("label", undefined, "check");
    const box = element("input");
    box.type = "checkbox";
    box.value = scope;
    box.checked = checked.includes(scope);
    label.append(box, document.createTextNode(scope));
    return label;
  });
  form.boxes.replaceChildren(...boxes);
}

/** Fixed kinds have fixed scopes: say which, instead of offering checkboxes. */
function fixedScopes(kind, scopes) {
  form.boxes.hidden = scopes !== null;
  form.note.hidden = scopes === null;
  if (scopes !== null) {
    form.note.textContent = `The scopes of a ${kind} key are fixed: ${scopes.join(", ")}.`;
  }
}

function fixedOf(kind) {
  const option = [...form.kind.options].find((choice) => choice.value === kind);
  const fixed = option && option.dataset.scopes;
  return fixed ? fixed.split(" ") : null;
}

function checkedScopes() {
  return [...form.boxes.querySelectorAll("input:checked")].map((box) => box.value);
}

$("new-key").addEventListener("click", (event) => {
  form.editing = null;
  $("key-dialog-title").textContent = "Create a key";
  $("key-dialog-target").textContent = "";
  form.name.value = "";
  $("kind-field").hidden = false;
  form.kind.value = [...form.kind.options].find((choice) => !choice.dataset.scopes).value;
  scopeBoxes([]);
  fixedScopes(form.kind.value, null);
  form.expires.value = form.expiresShown = "";
  form.submit.textContent = "Create";
  showError(form.error, null);
  showDialog(form.dialog, event.currentTarget);
  form.name.focus();
});

form.kind.addEventListener("change", () => fixedScopes(form.kind.value, fixedOf(form.kind.value)));

function openEdit(key, opener) {
  form.editing = key;
  $("key-dialog-title").textContent = "Edit key";
  $("key-dialog-target").textContent = `${key.key} (${key.kind})`;
  form.name.value = key.name;
  $("kind-field").hidden = true;
  scopeBoxes(key.scopes);
  fixedScopes(key.kind, key.immutable ? key.scopes : null);
  form.expires.value = form.expiresShown = localInput(key.expires_at);
  form.submit.textContent = "Save";
  showError(form.error, null);
  showDialog(form.dialog, opener);
  form.name.focus();
}

form.dialog.querySelector("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const editing = form.editing;
  const kind = editing ? editing.kind : form.kind.value;
  const body = { name: form.name.value };
  if (!editing) {
    body.kind = kind;
  }
  if (fixedOf(kind) === null) {
    body.scopes = checkedScopes();
  }
  form.submit.disabled = true;
  let answer;
  try {
    // Sent when changed: a key that has expired keeps its past expiry through a rename.
    if (form.expires.value !== form.expiresShown || form.expires.validity.badInput) {
      body.expires_at = expiryOf(form.expires);
    }
    answer = editing
      ? await api("PUT", keyPath(editing.key), body)
      : await api("POST", API, body);
  } catch (error) {
    report(form.error, error);
    return;
  } finally {
    form.submit.disabled = false;
  }
  form.dialog.close();
  if (editing) {
    if (editing.key === state.self.key) {
      adopt(answer); // the key in use now holds what was saved
    }
    await refresh(`button[data-action="Edit"][data-key="${CSS.escape(editing.key)}"]`);
  } else {
    showCreated(answer.key, "Key created");
    await loadPage();
  }
});

function showCreated(fullKey, title) {
  $("created-title").textContent = title;
  $("new-key-value").value = fullKey;
  $("copy-status").textContent = "";
  showDialog($("created-dialog"), $("new-key"));
  $("copy").focus();
}

$("created-dialog").addEventListener("close", () => {
  // Shown once: nothing of it stays in the page.
  $("new-key-value").value = "";
});

$("copy").addEventListener("click", async () => {
  const input = $("new-key-value");
  try {
    await navigator.clipboard.writeText(input.value);
    $("copy-status").textContent = "Copied to the clipboard.";
  } catch {
    input.select();
    $("copy-status").textContent = "Selected: press Ctrl+C (or ⌘C) to copy.";
  }
});

let rotating = null;
// What the API gives the new key when the body names no expiry: the old key's, when it is
// still ahead; else none (a time-limited key never becomes permanent by a rotation).
let inherited = null;

function openRotate(key, opener) {
  rotating = key;
  inherited = key.expires_at && new Date(key.expires_at) > new Date() ? key.expires_at : null;
  $("rotate-name").textContent = key.name;
  $("rotate-shown").textContent = key.key;
  $("rotate-grace").value = "0";
  const expires = $("rotate-expires");
  expires.value = expires.dataset.shown = localInput(inherited);
  sayNewExpiry();
  showError($("rotate-error"), null);
  showDialog($("rotate-dialog"), opener);
  $("rotate-grace").focus();
}

/** The new key's expiry, as the Expires input will make it: unchanged, the inherited one. */
function sayNewExpiry() {
  const expires = $("rotate-expires");
  const changed = expires.value !== expires.dataset.shown;
  const iso = changed ? expires.value && new Date(expires.value).toISOString() : inherited;
  $("rotate-expiry").textContent = iso
    ? `The new key expires ${when.format(new Date(iso))}.`
    : "The new key does not expire.";
}

$("rotate-expires").addEventListener("input", sayNewExpiry);

$("rotate-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const grace = $("rotate-grace");
  const button = $("rotate-confirm");
  button.disabled = true;
  let answer;
  try {
    if (grace.validity.badInput) {
      throw new Refusal(0, { detail: "Grace period: give a whole number of seconds." });
    }
    // Empty is sent as null, for the API to refuse: no default should end a key at once.
    const body = { grace_seconds: grace.value === "" ? null : Number(grace.value) };
    // Sent when changed (null: never); unchanged, the API gives the inherited expiry to
    // the second, where the input holds only minutes.
    const expires = $("rotate-expires");
    if (expires.value !== expires.dataset.shown || expires.validity.badInput) {
      body.expires_at = expiryOf(expires);
    }
    answer = await api("POST", `${keyPath(rotating.key)}/rotate`, body);
  } catch (error) {
    report($("rotate-error"), error);
    return;
  } finally {
    button.disabled = false;
  }
  $("rotate-dialog").close();
  if (rotating.key === state.self.key) {
    // The key in use was replaced: the page goes on with its replacement.
    sessionStorage.setItem(STORE, answer.key);
    try {
      adopt(await readKeyInUse());
    } catch (error) {
      report($("list-error"), error);
    }
  }
  showCreated(answer.key, "Key rotated");
  if (state.self) {
    await loadPage();
  }
});

let deleting = null;

function openDelete(key, opener) {
  deleting = key;
  $("delete-name").textContent = key.name;
  $("delete-shown").textContent = key.key;
  showError($("delete-error"), null);
  showDialog($("delete-dialog"), opener);
  $("delete-dialog").querySelector(".cancel").focus();
}

$("delete-confirm").addEventListener("click", async (event) => {
  const button = event.currentTarget;
  button.disabled = true;
  try {
    await api("DELETE", keyPath(deleting.key));
  } catch (error) {
    report($("delete-error"), error);
    return;
  } finally {
    button.disabled = false;
  }
  $("delete-dialog").close();
  await refresh(null);
});

// --- start --------------------------------------------------------------------------------

if (sessionStorage.getItem(STORE)) {
  useStoredKey();
} else {
  $("api-key").focus();
}
