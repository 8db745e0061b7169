// The audit log (contract section 10): the organization's events, newest first, paged and
// filtered by action as the API does, each change said as "Name: a → b". A view of its own,
// in place of the list of keys; only a key holding every scope may read it.

import { NewestRead } from "./api.js";
import { report, Fields } from "./dialogs.js";
import { $, describedBy, element, sortedEntries, timeOf, when } from "./dom.js";
import { loadPage } from "./keys.js";
import { lacking } from "./session.js";

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

// A change's field, named as the key dialogs' labels say.
const LABELS = {
  name: "Name",
  kind: "Kind",
  scopes: "Scopes",
  expires_at: "Expires",
  enabled: "Enabled",
  allowed_ips: "Allowed IPs",
  rate_limit: "Rate limit",
  metadata: "Metadata",
  replacement: "Replaced by",
  grace_seconds: "Grace period (seconds)",
};

/** A value of an event's details, as people read it. */
function said(name, value) {
  if (value === null || value === undefined) {
    return name === "expires_at" ? "never" : "none";
  }
  if (typeof value === "boolean") {
    return value ? "yes" : "no";
  }
  if (Array.isArray(value)) {
    return value.length ? value.join(", ") : "none";
  }
  if (name === "expires_at") {
    return when.format(new Date(value));
  }
  if (name === "rate_limit") {
    return `${value.requests} per ${value.seconds} s`;
  }
  if (typeof value === "object") {
    const members = sortedEntries(value);
    return members.length ? members.map(([key, text]) => `${key}=${text}`).join(", ") : "none";
  }
  return String(value);
}

/** What a new key starts with unless told otherwise: not worth a line of its own. */
const byDefault = (name, value) =>
  value === null ||
  (name === "enabled" && value === true) ||
  (typeof value === "object" && Object.keys(value).length === 0);

function changesCell(event) {
  const cell = element("td");
  cell.dataset.label = "Changes";
  const list = element("ul", undefined, "changes");
  for (const [name, value] of Object.entries(event.details)) {
    const label = LABELS[name] || name;
    if (event.action === "key.updated" && Array.isArray(value) && value.length === 2) {
      list.append(element("li", `${label}: ${said(name, value[0])} → ${said(name, value[1])}`));
    } else if (!(event.action === "key.created" && byDefault(name, value))) {
      list.append(element("li", `${label}: ${said(name, value)}`));
    }
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
 * when the event kept no name (recorded before names were kept). */
function keyNamed(name, shown) {
  const said = element("span", undefined, "named");
  if (name === null || name === undefined) {
    said.append(element("code", shown));
    return said;
  }
  said.append(element("span", name, "key-name"), " (", element("code", shown), ")");
  return said;
}

function eventRow(event) {
  const row = element("tr");
  const actor =
    event.actor in NOT_KEYS ? NOT_KEYS[event.actor] : keyNamed(event.actor_name, event.actor);
  const action = element("span", ACTION_WORDS.get(event.action) || event.action);
  action.title = event.action;
  row.append(
    cellOf("Time", timeOf(event.at)),
    cellOf("Action", action),
    cellOf("Actor", actor),
    cellOf("Target", keyNamed(event.target_name, event.target)),
    changesCell(event),
  );
  return row;
}

// Filters changed quickly show what was chosen last.
const reads = new NewestRead();

/** Show log.page; false when it could not be read, or a newer read was asked for since. */
async function loadEvents() {
  const query = new URLSearchParams({ page: log.page, page_size: log.pageSize });
  if (log.action) {
    query.set("action", log.action);
  }
  const table = $("audit-table");
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
  const rows = answer.data.map(eventRow);
  if (rows.length === 0) {
    const chosen = $("audit-action").selectedOptions[0];
    const empty = element("td", log.action ? `No events: ${chosen.textContent}.` : "No events.");
    empty.colSpan = table.tHead.rows[0].cells.length;
    rows.push(element("tr"));
    rows[0].append(empty);
  }
  $("audit-rows").replaceChildren(...rows);
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
