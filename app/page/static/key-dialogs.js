// The dialogs that change keys: create and edit (one form), and the list rows' buttons that
// open them and rotate-dialog.js's and delete-dialog.js's. Each offers only what the key in
// use may do, and shows a refusal once.

import { API, api, keyPath } from "./api.js";
import { expiryOf, expiryRule, Fields, localInput, report, showDialog } from "./dialogs.js";
import { $, describedBy, element, listed } from "./dom.js";
import { listedKey, loadPage, refresh } from "./keys.js";
import { adopt } from "./signin.js";
import { showCreated } from "./new-key.js";
import { fillPolicy, policyFields, policyOf, unchanged } from "./policy.js";
import { quotaWords } from "./quota.js";
import { offerIdentities } from "./identity-words.js";
import { lacking, selfEnds, session } from "./session.js";
import { openRotate } from "./rotate-dialog.js";
import { openDelete } from "./delete-dialog.js";

// --- create and edit: the same inputs, offering only the scopes of the key in use ---------

const form = {
  dialog: $("key-dialog"),
  name: $("key-name"),
  kind: $("key-kind"),
  identity: $("key-identity"),
  expires: $("key-expires"),
  boxes: $("scope-boxes"),
  note: $("scopes-note"),
  submit: $("key-dialog-submit"),
  editing: null, // the key being edited; null when creating
  saved: null, // what to do after an edit is saved, given the key as saved; null: the list
  expiresShown: "", // what the Expires input showed when the form opened
};
form.fields = new Fields($("key-dialog-error"), {
  name: { label: "Name", message: $("key-name-error"), inputs: () => [form.name] },
  kind: { label: "Kind", message: $("key-kind-error"), inputs: () => [form.kind] },
  scopes: {
    label: "Scopes",
    message: $("scopes-error"),
    inputs: () => [...form.boxes.querySelectorAll("input")],
  },
  expires_at: { label: "Expires", message: $("key-expires-error"), inputs: () => [form.expires] },
  identity: {
    label: "Identity",
    message: $("key-identity-error"),
    inputs: () => [form.identity],
  },
  ...policyFields,
});

/** What the Allowed IPs input may hold, by the key in use's own (docs/design.md, "Key policy"). */
function ipRule(creating) {
  const own = session.self.allowed_ips;
  if (!own.length) {
    return "Empty: from anywhere.";
  }
  const where = `The key in use is limited to ${own.join(", ")}`;
  return creating
    ? `${where}: empty means the same; any address given must lie inside them.`
    : `${where}: any address given must lie inside them, and empty is refused.`;
}

/** What the quota inputs may hold, by the key in use's own quota (docs/design.md, "Quotas"). */
function quotaRule(creating) {
  const own = session.self.quota;
  if (!own) {
    return creating
      ? "Quota requests empty: no quota, unless the organization's policy gives new keys one."
      : "Quota requests empty: no quota.";
  }
  const period = [...$("key-quota-period").options].find((o) => o.value === own.period).text;
  const where =
    `The key in use has a quota of ${quotaWords(own)}: a quota given must have the same ` +
    `period (${period}) and at most ${own.requests.toLocaleString()} requests`;
  return creating
    ? `${where}; empty gives the new key the same (or the organization's default quota, ` +
        "if its policy sets one within it)."
    : `${where}, and empty is refused.`;
}

function scopeBoxes(checked) {
  const boxes = session.self.scopes.map((scope) => {
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

/** The kinds whose fixed scopes exceed the key in use are offered disabled, saying why. */
function offerKinds() {
  const beyond = [];
  for (const option of form.kind.options) {
    const fixed = fixedOf(option.value);
    option.disabled = fixed !== null && lacking(fixed).length > 0;
    if (option.disabled) {
      beyond.push(option.value);
    }
  }
  const note = $("kind-note");
  note.hidden = beyond.length === 0;
  note.textContent =
    `${listed(beyond)} keys hold scopes the key in use lacks: a key makes only keys ` +
    "within its own scopes.";
  form.kind.dataset.hints = note.hidden ? "" : note.id;
  describedBy(form.kind);
}

function checkedScopes() {
  return [...form.boxes.querySelectorAll("input:checked")].map((box) => box.value);
}

$("new-key").addEventListener("click", (event) => {
  form.editing = null;
  form.saved = null;
  $("key-dialog-title").textContent = "Create a key";
  $("key-dialog-target").textContent = "";
  form.name.value = "";
  $("kind-field").hidden = false;
  offerKinds();
  form.kind.value = [...form.kind.options].find((choice) => !choice.dataset.scopes).value;
  scopeBoxes([]);
  fixedScopes(form.kind.value, null);
  form.expires.value = form.expiresShown = "";
  const ends = selfEnds();
  expiryRule(
    form.expires,
    ends
      ? `Empty: it expires with the key in use, ${ends}; no key it makes outlives it.`
      : "Empty: the key never expires.",
    !ends,
  );
  fillPolicy(null, { ips: ipRule(true), quota: quotaRule(true), enabled: "" });
  form.submit.textContent = "Create";
  form.fields.clear();
  $("identity-field").hidden = true;
  showDialog(form.dialog, event.currentTarget);
  form.name.focus();
  // An sdk_integration key may give the key an identity: the choice, once it is read.
  offerIdentities(form.identity)
    .then((offered) => {
      $("identity-field").hidden = !offered || form.editing !== null;
    })
    .catch((error) => report(form.fields, error));
});

form.kind.addEventListener("change", () => fixedScopes(form.kind.value, fixedOf(form.kind.value)));

/** Edit `key`, its scopes checked but those of `unchecked`; once saved, `saved(key as
 * saved)` if given (Narrow scopes, in its usage), else the list again. */
export function openEdit(key, opener, unchecked = [], saved = null) {
  form.editing = key;
  form.saved = saved;
  $("key-dialog-title").textContent = "Edit key";
  const holder = key.identity ? `, identity ${key.identity.external_id}` : "";
  $("key-dialog-target").textContent = `${key.key} (${key.kind}${holder})`;
  $("identity-field").hidden = true;
  form.name.value = key.name;
  $("kind-field").hidden = true;
  scopeBoxes(key.scopes.filter((scope) => !unchecked.includes(scope)));
  fixedScopes(key.kind, key.immutable ? key.scopes : null);
  form.expires.value = form.expiresShown = localInput(key.expires_at);
  const ends = selfEnds();
  expiryRule(
    form.expires,
    ends
      ? `The key in use expires ${ends}: it can set no expiry later than that, nor remove one.`
      : "Empty: the key never expires.",
    !ends,
  );
  fillPolicy(key, {
    ips: ipRule(false),
    quota: quotaRule(false),
    enabled:
      key.key === session.self.key
        ? "This is the key you are using: disabled, it can do nothing more on this page."
        : "",
  });
  form.submit.textContent = "Save";
  form.fields.clear();
  showDialog(form.dialog, opener);
  form.name.focus();
}

/** A new key's body: what the form says, its policy only where it differs from the
 * defaults (unnamed, a key made by a key limited to some addresses takes the same). */
function created(kind) {
  const body = { name: form.name.value, kind };
  if (fixedOf(kind) === null) {
    body.scopes = checkedScopes();
  }
  if (form.expires.value !== "" || form.expires.validity.badInput) {
    body.expires_at = expiryOf(form.expires);
  }
  const policy = policyOf();
  if (!policy.enabled) {
    body.enabled = false;
  }
  if (policy.allowed_ips.length) {
    body.allowed_ips = policy.allowed_ips;
  }
  if (policy.rate_limit) {
    body.rate_limit = policy.rate_limit;
  }
  if (policy.quota) {
    body.quota = policy.quota;
  }
  if (Object.keys(policy.metadata).length) {
    body.metadata = policy.metadata;
  }
  if (!$("identity-field").hidden && form.identity.value) {
    body.identity = form.identity.value;
  }
  return body;
}

/** An edit's body: only what changed (PUT replaces each field it names and keeps the rest,
 * so that a field the key in use could not set, such as a past expiry, is left alone). */
function changed(key) {
  const body = {};
  if (form.name.value !== key.name) {
    body.name = form.name.value;
  }
  const scopes = checkedScopes();
  if (fixedOf(key.kind) === null && scopes.join(" ") !== key.scopes.join(" ")) {
    body.scopes = scopes;
  }
  if (form.expires.value !== form.expiresShown || form.expires.validity.badInput) {
    body.expires_at = expiryOf(form.expires);
  }
  for (const [name, wanted] of Object.entries(policyOf())) {
    if (!unchanged(key, name, wanted)) {
      body[name] = wanted;
    }
  }
  return body;
}

form.dialog.querySelector("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const editing = form.editing;
  const kind = editing ? editing.kind : form.kind.value;
  form.submit.disabled = true;
  let answer = null;
  try {
    const body = editing ? changed(editing) : created(kind);
    if (!editing) {
      answer = await api("POST", API, body);
    } else if (Object.keys(body).length) {
      answer = await api("PUT", keyPath(editing.key), body);
    }
  } catch (error) {
    report(form.fields, error);
    return;
  } finally {
    form.submit.disabled = false;
  }
  form.dialog.close();
  if (editing) {
    if (answer && editing.key === session.self.key) {
      adopt(answer); // the key in use now holds what was saved
    }
    if (form.saved) {
      form.saved(answer || editing);
      await loadPage(); // the list behind it, as it is now
      return;
    }
    await refresh(`button[data-action="Edit"][data-key="${CSS.escape(editing.key)}"]`);
  } else {
    showCreated(answer.key, "Key created");
    await loadPage();
  }
});

// --- the buttons of the list's rows ---------------------------------------------------------

const ACTIONS = { Edit: (key, opener) => openEdit(key, opener), Rotate: openRotate, Delete: openDelete };

$("rows").addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  if (button && !button.disabled && button.dataset.action in ACTIONS) {
    ACTIONS[button.dataset.action](listedKey(button.dataset.key), button);
  }
});
