// The audit log (docs/design.md, "The audit log"): the organization's events, newest first, paged
// and filtered by action as the API does, each change said as "Name: a → b" and every detail in
// words ("Quota: 2 a day", "1 use granted: 0 left before, 1 after"), a webhook endpoint by
// its URL. A view of its own, in place of the list of keys; only a key holding every scope
// may read it.

import { api, NewestRead } from "./api.js";
import { report, Fields } from "./dialogs.js";
import { $, describedBy, element, showRows, sortedEntries, timeOf, when } from "./dom.js";
import { eventWords } from "./event-words.js";
import { loadPage } from "./keys.js";
import { quotaWords } from "./quota.js";
import { lacking, session } from "./session.js";

const EVERY_SCOPE = document.body.dataset.scopes.split(" ");
// Each action's words (app/page's ACTION_WORDS), from the Action filter's options.
const ACTION_WORDS = new Map(
  [...$("audit-action").options].map((option) => [option.value, option.dataset.words]),
);
// Who acted, when it was no key.
const NOT_KEYS = { operator: "Operator (command line)", "leak-report": "Leak report" };
const log = { page: 1, pageSize: 50, action: "" };
const auditError = new Fields($("audit-error"));

/** Audit log is offered to a key holding every scope; otherwise disabled, saying why. */
export function offerAudit() {
  const lacks = lacking(EVERY_SCOPE);
  const button = $("open-audit");
  const why = $("audit-why");
  button.disabled = lacks.length > 0;
  why.hidden = !button.disabled;
  why.textContent =
    `Audit log: only a key holding every scope may read it; the key in use lacks ` +
    `${lacks.join(", ")}.`;
  button.dataset.hints = button.disabled ? why.id : "";
  describedBy(button);
}

// A change's field, named as the key dialogs' labels say (a webhook endpoint's as the
// Webhooks view's columns do).
const LABELS = {
  name: "Name",
  kind: "Kind",
  scopes: "Scopes",
  expires_at: "Expires",
  enabled: "Enabled",
  allowed_ips: "Allowed IPs",
  rate_limit: "Rate limit",
  metadata: "Metadata",
  quota: "Quota",
  replacement: "Replaced by",
  grace_seconds: "Grace period (seconds)",
  url: "URL",
  events: "Events",
  description: "Description",
  external_id: "External id",
};
// The actions whose details are each field's [before, after].
const CHANGES = new Set(["key.updated", "webhook.updated", "identity.updated"]);
// The actions whose details are what was made (or, deleted, what was): a field at its
// default is no news there.
const MADE = new Set(["key.created", "webhook.created", "identity.created", "identity.deleted"]);
// An identity's fields that its created and deleted events say, of the identity object
// they carry (`details.identity`): what a person set, not its counts and times.
const IDENTITY_FIELDS = ["external_id", "name", "metadata", "rate_limit", "quota"];
const isIdentity = (event) => event.action.startsWith("identity.");

const number = (count) => Number(count).toLocaleString();
const uses = (count) => `${number(count)} ${count === 1 ? "use" : "uses"}`;
const moment = (iso) => when.format(new Date(iso));
// How long before a key's expiry its webhooks were told (app/webhooks/announcements.py).
const NOTICES = { "7d": "told 7 days before", "1d": "told a day before" };

/** A value of an event's details, as people read it. */
function said(name, value) {
  if (value === null || value === undefined) {
    return name === "expires_at" ? "never" : "none";
  }
  if (typeof value === "boolean") {
    return value ? "yes" : "no";
  }
  if (name === "events" && Array.isArray(value)) {
    return value.length ? value.map(eventWords).join(", ") : "none";
  }
  if (Array.isArray(value)) {
    return value.length ? value.join(", ") : "none";
  }
  if (name === "expires_at") {
    return moment(value);
  }
  if (name === "rate_limit") {
    return `${value.requests} per ${value.seconds} s`;
  }
  if (name === "quota") {
    return quotaWords(value);
  }
  if (typeof value === "object") {
    // Metadata: name=value, ...; anything deeper as its JSON, never "[object Object]".
    const members = sortedEntries(value).map(([key, text]) =>
      typeof text === "object" && text !== null ? `${key}=${JSON.stringify(text)}` : `${key}=${text}`,
    );
    return members.length ? members.join(", ") : "none";
  }
  return value === "" ? "none" : String(value);
}

/** What a new key or endpoint starts with unless told otherwise: not worth a line. */
const byDefault = (name, value) =>
  value === null ||
  value === "" ||
  (name === "enabled" && value === true) ||
  (typeof value === "object" && Object.keys(value).length === 0);

/** The lines of the events whose details are no list of fields: each a sentence. */
const SENTENCES = {
  "key.quota": ({ add, set_remaining: left, remaining }) => {
    const what = add === undefined ? `Uses left set to ${number(left)}` : `${uses(add)} granted`;
    if (!Array.isArray(remaining)) {
      return [what];
    }
    return [`${what}: ${number(remaining[0])} left before, ${number(remaining[1])} after`];
  },
  "key.quota_exhausted": ({ quota }) => [
    quota ? `Every use of its quota of ${quotaWords(quota)} spent` : "Its quota used up",
  ],
  "identity.quota_exhausted": ({ quota }) => [
    quota ? `Every use of its quota of ${quotaWords(quota)} spent` : "Its quota used up",
  ],
  "key.expiring": ({ expires_at: ends, notice }) => [
    `Expires ${moment(ends)}` + (notice in NOTICES ? `, ${NOTICES[notice]}` : ""),
  ],
  "key.expired": ({ expires_at: ended }) => [`Expired ${moment(ended)}`],
  "webhook.new_secret": ({ previous_secret_expires_at: until }) => [
    `The previous secret signs until ${moment(until)}`,
  ],
  "webhook.disabled": ({ reason, last }) =>
    [reason, last ? `Last answer: ${last}` : null].filter(Boolean),
};

/** An event's details, an identity's created or deleted event's as the identity's fields. */
function detailsOf(event) {
  const identity = event.details.identity;
  if (!isIdentity(event) || typeof identity !== "object" || identity === null) {
    return event.details;
  }
  return Object.fromEntries(
    IDENTITY_FIELDS.filter((name) => name in identity).map((name) => [name, identity[name]]),
  );
}

/** An event's details in words, one line each. */
function changes(event) {
  const details = detailsOf(event);
  if (event.action in SENTENCES && Object.keys(details).length) {
    return SENTENCES[event.action](details);
  }
  const lines = [];
  for (const [name, value] of Object.entries(details)) {
    const label = LABELS[name] || name;
    if (CHANGES.has(event.action) && Array.isArray(value) && value.length === 2) {
      lines.push(`${label}: ${said(name, value[0])} → ${said(name, value[1])}`);
    } else if (!(MADE.has(event.action) && byDefault(name, value))) {
      lines.push(`${label}: ${said(name, value)}`);
    }
  }
  return lines;
}

function changesCell(event) {
  const cell = element("td");
  cell.dataset.label = "Changes";
  const list = element("ul", undefined, "changes");
  for (const line of changes(event)) {
    list.append(element("li", line));
  }
  if (list.childElementCount) {
    cell.append(list);
  }
  return cell;
}

function cellOf(label, content) {
  const cell = element("td");
  cell.dataset.label = label;
  cell.append(content);
  return cell;
}

/** A key as an event names it: "SDK Integration (ak_Au1Zw...)"; its shown value alone
 * when the event kept no name (recorded before names were kept). An identity likewise,
 * after the word "Identity". */
function keyNamed(name, shown, what = "") {
  const said = element("span", undefined, "named");
  if (what) {
    said.append(`${what} `);
  }
  if (name === null || name === undefined) {
    said.append(element("code", shown));
    return said;
  }
  said.append(element("span", name, "key-name"), " (", element("code", shown), ")");
  return said;
}

// Webhook endpoints by id: the URL each last had in the events read, else in the endpoints
// list (read once a showing of the log, when an event names an endpoint by its id alone):
// listed is null until read, false when it could not be.
const endpoints = { urls: new Map(), listed: null };
const isWebhook = (event) => event.action.startsWith("webhook.");

/** The URL an event itself gives its endpoint (made, deleted, or its URL changed). */
function urlOf(event) {
  const url = event.details.url;
  return Array.isArray(url) ? url[1] : url;
}

/** Learn the URL of every endpoint the events name, asking the API at most once. */
async function learnEndpoints(events) {
  for (const event of events) {
    const url = urlOf(event);
    if (isWebhook(event) && typeof url === "string" && !endpoints.urls.has(event.target)) {
      endpoints.urls.set(event.target, url);
    }
  }
  const unknown = events.some((event) => isWebhook(event) && !endpoints.urls.has(event.target));
  // Only an sdk_integration key may read the endpoints, as Webhooks says.
  if (!unknown || endpoints.listed !== null || session.self.kind !== "sdk_integration") {
    return;
  }
  try {
    const answer = await api("GET", "api/webhooks");
    endpoints.listed = new Map(answer.data.map((endpoint) => [endpoint.id, endpoint.url]));
  } catch {
    endpoints.listed = false; // the events still show, their endpoints unnamed
  }
}

/** A webhook endpoint as an event names it: "Webhook https://...", its id in the title. */
function endpointNamed(id) {
  const url = endpoints.urls.get(id) || (endpoints.listed && endpoints.listed.get(id));
  const said = element("span", undefined, "named");
  if (url) {
    said.append("Webhook ", element("code", url, "url"));
  } else {
    said.append(endpoints.listed ? "A deleted webhook" : "A webhook");
  }
  said.title = id;
  return said;
}

function eventRow(event) {
  const row = element("tr");
  const actor =
    event.actor in NOT_KEYS ? NOT_KEYS[event.actor] : keyNamed(event.actor_name, event.actor);
  const action = element("span", ACTION_WORDS.get(event.action) || event.action);
  action.title = event.action;
  let target;
  if (isWebhook(event)) {
    target = endpointNamed(event.target);
  } else if (isIdentity(event)) {
    target = keyNamed(event.target_name, event.target, "Identity");
  } else {
    target = keyNamed(event.target_name, event.target);
  }
  row.append(
    cellOf("Time", timeOf(event.at)),
    cellOf("Action", action),
    cellOf("Actor", actor),
    cellOf("Target", target),
    changesCell(event),
  );
  return row;
}

// Filters changed quickly show what was chosen last: the newest read, and the newest
// showing of what it read (naming its endpoints may take one more read).
const reads = new NewestRead();
let showings = 0;

/** Show log.page; false when it could not be read, or a newer read was asked for since. */
async function loadEvents() {
  const query = new URLSearchParams({ page: log.page, page_size: log.pageSize });
  if (log.action) {
    query.set("action", log.action);
  }
  const table = $("audit-table");
  const showing = ++showings;
  let answer;
  try {
    answer = await reads.get(`api/audit?${query}`, table);
  } catch (error) {
    report(auditError, error);
    return false;
  }
  if (answer === undefined) {
    return false; // a newer read is on its way
  }
  auditError.clear();
  await learnEndpoints(answer.data);
  if (showing !== showings) {
    return false; // a newer read, or the log was left
  }
  const rows = answer.data.map(eventRow);
  const chosen = $("audit-action").selectedOptions[0];
  const none = log.action ? `No events: ${chosen.textContent}.` : "No events.";
  showRows($("audit-rows"), rows, none);
  const pages = Math.max(1, Math.ceil(answer.total_count / answer.page_size));
  const count = `${answer.total_count} ${answer.total_count === 1 ? "event" : "events"}`;
  $("audit-status").textContent = `Page ${log.page} of ${pages} · ${count}`;
  $("audit-previous").disabled = log.page <= 1;
  $("audit-next").disabled = log.page >= pages;
  return true;
}

/** Out of the audit log (if shown), which starts afresh next time. */
export function closeAudit() {
  reads.dropAll();
  showings += 1;
  endpoints.urls.clear();
  endpoints.listed = null;
  $("audit").hidden = true;
  Object.assign(log, { page: 1, action: "" });
  $("audit-action").value = "";
  $("audit-rows").replaceChildren();
  $("audit-status").textContent = "";
  auditError.clear();
}

$("open-audit").addEventListener("click", async () => {
  $("keys").hidden = true;
  $("audit").hidden = false;
  $("audit-title").focus();
  await loadEvents();
});

$("audit-back").addEventListener("click", async () => {
  closeAudit();
  $("keys").hidden = false;
  $("open-audit").focus();
  await loadPage(); // what changed meanwhile
});

async function turn(page, control) {
  log.page = page;
  await loadEvents();
  (control.disabled ? $("audit-title") : control).focus();
}

$("audit-previous").addEventListener("click", (event) => turn(log.page - 1, event.currentTarget));
$("audit-next").addEventListener("click", (event) => turn(log.page + 1, event.currentTarget));
$("audit-action").addEventListener("change", (event) => {
  log.action = event.currentTarget.value;
  log.page = 1;
  loadEvents();
});
$("audit-page-size").addEventListener("change", (event) => {
  log.pageSize = Number(event.currentTarget.value);
  log.page = 1;
  loadEvents();
});
