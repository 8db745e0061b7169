// Identities (docs/design.md, "Identities"): whoever holds keys, in the organization's own terms.
// A view of its own, in place of the list of keys: the identities with their limits in
// words, made, edited and deleted in dialogs, and one identity's keys and usage. Only an
// sdk_integration key may manage them, as the API says.

import { api, NewestRead, Refusal } from "./api.js";
import { Fields, report, showDialog } from "./dialogs.js";
import { $, describedBy, element, showRows } from "./dom.js";
import { limitWords } from "./identity-words.js";
import { loadPage } from "./keys.js";
import { leftWords } from "./quota.js";
import { session } from "./session.js";

const PATH = "api/identities";
const identitiesError = new Fields($("identities-error"));
const detailError = new Fields($("identity-detail-error"));
const deletion = { identity: null, fields: new Fields($("identity-delete-error")) };
const form = {
  dialog: $("identity-dialog"),
  externalId: $("identity-external-id"),
  name: $("identity-name"),
  requests: $("identity-requests"),
  seconds: $("identity-seconds"),
  quota: $("identity-quota-requests"),
  period: $("identity-quota-period"),
  editing: null, // the identity being edited; null when creating
};
form.fields = new Fields($("identity-error"), {
  external_id: {
    label: "External id",
    message: $("identity-external-id-error"),
    inputs: () => [form.externalId],
  },
  name: { label: "Name", message: $("identity-name-error"), inputs: () => [form.name] },
  rate_limit: {
    label: "Rate limit",
    message: $("identity-rate-error"),
    inputs: () => [form.requests, form.seconds],
    words: (messages) =>
      said(messages, { requests: "Requests", seconds: "Per seconds" }, "Rate limit"),
  },
  quota: {
    label: "Quota",
    message: $("identity-quota-error"),
    inputs: () => [form.quota, form.period],
    words: (messages) =>
      said(messages, { requests: "Quota requests", period: "Quota period" }, "Quota"),
  },
});

/** The API's "Item requests: ..." of a limit, by the labels on screen ("Requests: ..."). */
function said(messages, labels, label) {
  return messages
    .map((message) => {
      const item = /^Item (\w+): (.*)$/s.exec(message);
      return item && item[1] in labels
        ? `${labels[item[1]]}: ${item[2]}`
        : `${label}: ${message}`;
    })
    .join(" ");
}

/** Identities is offered to an sdk_integration key; otherwise disabled, saying why. */
export function offerIdentities() {
  const button = $("open-identities");
  const why = $("identities-why");
  button.disabled = session.self.kind !== "sdk_integration";
  why.hidden = !button.disabled;
  why.textContent = "Identities: only an sdk_integration key may manage them.";
  button.dataset.hints = button.disabled ? why.id : "";
  describedBy(button);
}

function cellOf(label, content) {
  const cell = element("td");
  cell.dataset.label = label;
  cell.append(content);
  return cell;
}

function button(text, label, action) {
  const made = element("button", text);
  made.type = "button";
  made.setAttribute("aria-label", label);
  made.addEventListener("click", action);
  return made;
}

const keysWords = (count) => `${count.toLocaleString()} ${count === 1 ? "key" : "keys"}`;

function identityRow(identity) {
  const row = element("tr");
  const who = identity.external_id;
  const actions = element("td", undefined, "row-actions");
  const buttons = element("div", undefined, "buttons");
  buttons.append(
    button("Keys and usage", `Keys and usage of ${who}`, (event) =>
      showDetail(identity, event.currentTarget),
    ),
    button("Edit", `Edit ${who}`, (event) => openIdentity(identity, event.currentTarget)),
    button("Delete", `Delete ${who}`, (event) => openDelete(identity, event.currentTarget)),
  );
  actions.append(buttons);
  row.append(
    cellOf("External id", element("code", who)),
    cellOf("Name", identity.name),
    cellOf("Limits", limitWords(identity)),
    cellOf("Quota left", identity.quota ? leftWords(identity) : "No quota"),
    cellOf("Keys", keysWords(identity.key_count)),
    actions,
  );
  return row;
}

const reads = new NewestRead();

/** The organization's identities (the first 200: an organization's holders fit a page). */
async function loadIdentities() {
  const table = $("identity-table");
  let answer;
  try {
    answer = await reads.get(`${PATH}?page_size=200`, table);
  } catch (error) {
    report(identitiesError, error);
    return;
  }
  if (answer === undefined) {
    return; // a newer read is on its way
  }
  identitiesError.clear();
  const rows = answer.data.map(identityRow);
  showRows($("identity-rows"), rows, "No identities yet.");
  const count = answer.total_count;
  $("identities-status").textContent = `${count} ${count === 1 ? "identity" : "identities"}`;
}

// --- one identity: its keys and its usage ------------------------------------------------

const number = (count) => count.toLocaleString();

/** "In the last 30 days, its keys were used 12 times: 9 allowed and 3 refused." */
function usageWords(usage) {
  const allowed = usage.total.allowed;
  const refused = Object.values(usage.total.refused).reduce((sum, count) => sum + count, 0);
  const all = allowed + refused;
  return (
    `In the last 30 days, its keys were used ${number(all)} ${all === 1 ? "time" : "times"}: ` +
    `${number(allowed)} allowed and ${number(refused)} refused.`
  );
}

async function showDetail(identity) {
  $("identity-detail").hidden = false;
  $("identity-detail-title").textContent = `Keys and usage of ${identity.external_id}`;
  $("identity-usage").textContent = "";
  $("identity-key-rows").replaceChildren();
  detailError.clear();
  $("identity-detail-title").focus();
  const reference = encodeURIComponent(identity.id);
  let keys;
  let usage;
  try {
    [keys, usage] = await Promise.all([
      api("GET", `api/keys?identity=${reference}&page_size=200`),
      api("GET", `${PATH}/${reference}/usage`),
    ]);
  } catch (error) {
    report(detailError, error);
    return;
  }
  $("identity-usage").textContent = usageWords(usage);
  const rows = keys.data.map((key) => {
    const row = element("tr");
    row.append(
      cellOf("Name", key.name),
      cellOf("Kind", key.kind),
      cellOf("Key", element("code", key.key)),
    );
    return row;
  });
  showRows($("identity-key-rows"), rows, "This identity holds no key.");
}

// --- create and edit ------------------------------------------------------------------------

function openIdentity(identity, opener) {
  form.editing = identity;
  $("identity-dialog-title").textContent = identity ? "Edit identity" : "New identity";
  form.externalId.value = identity ? identity.external_id : "";
  form.externalId.readOnly = identity !== null;
  form.name.value = identity ? identity.name : "";
  form.requests.value = identity?.rate_limit ? identity.rate_limit.requests : "";
  form.seconds.value = identity?.rate_limit ? identity.rate_limit.seconds : "";
  form.quota.value = identity?.quota ? identity.quota.requests : "";
  form.period.value = identity?.quota ? identity.quota.period : "day";
  form.fields.clear();
  showDialog(form.dialog, opener);
  (identity ? form.name : form.externalId).focus();
}

const whole = (input) => (input.value === "" ? null : Number(input.value));

/** What the form says, as the API takes it; the page's own refusals for what an input
 * cannot hand over (half a rate limit, a number that is none). */
function bodyOf() {
  const errors = {};
  const [requests, seconds, quota] = [whole(form.requests), whole(form.seconds), whole(form.quota)];
  if ((requests === null) !== (seconds === null)) {
    errors.rate_limit = ["Give both Requests and Per seconds, or neither."];
  } else if ([requests, seconds].some((value) => value !== null && !Number.isInteger(value))) {
    errors.rate_limit = ["Requests and Per seconds must be whole numbers."];
  }
  if (quota !== null && !Number.isInteger(quota)) {
    errors.quota = ["Quota requests must be a whole number."];
  }
  if (form.requests.validity.badInput || form.seconds.validity.badInput) {
    errors.rate_limit = ["Requests and Per seconds must be whole numbers."];
  }
  if (form.quota.validity.badInput) {
    errors.quota = ["Quota requests must be a whole number."];
  }
  if (Object.keys(errors).length) {
    throw Refusal.invalid(errors);
  }
  const body = {
    name: form.name.value,
    rate_limit: requests === null ? null : { requests, seconds },
    quota: quota === null ? null : { requests: quota, period: form.period.value },
  };
  if (!form.editing) {
    body.external_id = form.externalId.value;
  }
  return body;
}

$("identity-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const save = $("identity-save");
  const editing = form.editing;
  save.disabled = true;
  try {
    const body = bodyOf();
    if (editing) {
      await api("PUT", `${PATH}/${encodeURIComponent(editing.id)}`, body);
    } else {
      await api("POST", PATH, body);
    }
  } catch (error) {
    report(form.fields, error);
    return;
  } finally {
    save.disabled = false;
  }
  form.dialog.close();
  $("identities-status").textContent = "";
  await loadIdentities();
  $("identities-title").focus();
});

// --- delete -------------------------------------------------------------------------------

function openDelete(identity, opener) {
  deletion.identity = identity;
  $("identity-delete-name").textContent = `${identity.external_id} (${identity.name})`;
  deletion.fields.clear();
  showDialog($("identity-delete-dialog"), opener);
  $("identity-delete-dialog").querySelector(".cancel").focus();
}

$("identity-delete-confirm").addEventListener("click", async (event) => {
  const confirm = event.currentTarget;
  confirm.disabled = true;
  try {
    await api("DELETE", `${PATH}/${encodeURIComponent(deletion.identity.id)}`);
  } catch (error) {
    report(deletion.fields, error);
    return;
  } finally {
    confirm.disabled = false;
  }
  $("identity-delete-dialog").close();
  $("identity-detail").hidden = true;
  await loadIdentities();
  $("identities-title").focus();
});

/** Out of the identities view (if shown), which starts afresh next time. */
export function closeIdentities() {
  reads.dropAll();
  $("identities").hidden = true;
  $("identity-detail").hidden = true;
  $("identity-rows").replaceChildren();
  $("identity-key-rows").replaceChildren();
  $("identities-status").textContent = "";
  identitiesError.clear();
  detailError.clear();
}

$("open-identities").addEventListener("click", async () => {
  $("keys").hidden = true;
  $("identities").hidden = false;
  $("identities-title").focus();
  await loadIdentities();
});

$("new-identity").addEventListener("click", (event) => openIdentity(null, event.currentTarget));

$("identities-back").addEventListener("click", async () => {
  closeIdentities();
  $("keys").hidden = false;
  $("open-identities").focus();
  await loadPage();
});
