// The list of the organization's keys: paged and filtered as the API does, each key with
// what the key in use may do to it (and, when it may not, why).

import { API, NewestRead } from "./api.js";
import { Fields, report } from "./dialogs.js";
import { $, element, showRows, sortedEntries, timeOf } from "./dom.js";
import { leftWords } from "./quota.js";
import { lacking, session } from "./session.js";
import { countWords, forgetReads, readUsage, usageChart } from "./usage-chart.js";

export const listing = { page: 1, pageSize: 50, kind: "", state: "", unusedDays: "" };
// The keys on screen by shown value, for the buttons of their rows.
const listed = new Map();
const listError = new Fields($("list-error"));

export const listedKey = (shown) => listed.get(shown);

function timeCell(label, iso, none, past) {
  const cell = element("td");
  cell.dataset.label = label;
  if (!iso) {
    cell.textContent = none;
    return cell;
  }
  if (past && new Date(iso) <= new Date()) {
    cell.append(past + " ");
  }
  cell.append(timeOf(iso));
  return cell;
}

/** Why the key in use can never do each action to `key`; none: it may. */
export function refusals(key) {
  const lacks = lacking(key.scopes);
  if (lacks.length) {
    const why = `It holds scopes the key in use lacks: ${lacks.join(", ")}.`;
    return { Edit: why, Rotate: why, Delete: why };
  }
  if (key.replaced_by) {
    return { Rotate: "It was replaced already: rotate its successor." };
  }
  return {};
}

/** A key's policy in a few words: "limited to 100 per 60 s · 37 of 100 uses left today · from
 * 2 networks"; "" for none. */
function policyWords(key) {
  const words = [];
  if (key.identity) {
    words.push(`identity ${key.identity.external_id}`);
  }
  if (key.rate_limit) {
    words.push(`limited to ${key.rate_limit.requests} per ${key.rate_limit.seconds} s`);
  }
  if (key.quota) {
    words.push(leftWords(key));
  }
  const ips = key.allowed_ips;
  if (ips.length) {
    words.push(ips.length === 1 ? `from ${ips[0]}` : `from ${ips.length} networks`);
  }
  const names = sortedEntries(key.metadata).map(([name]) => name);
  if (names.length) {
    words.push(`metadata: ${names.join(", ")}`);
  }
  return words.join(" · ");
}

function nameCell(key, nameId) {
  const cell = element("td");
  cell.dataset.label = "Name";
  const title = element("div", undefined, "title");
  const name = element("span", key.name, "key-name");
  name.id = nameId;
  title.append(name);
  if (key.key === session.self.key) {
    title.append(
      " ",
      element("span", "this key", "badge"),
      element("span", ": the key you are using", "visually-hidden"),
    );
  }
  if (!key.enabled) {
    title.append(" ", element("span", "disabled", "badge off"));
  }
  const names = element("div"); // one item of the narrow layout's grid
  names.append(title, element("code", key.key, "shown"));
  const policy = policyWords(key);
  if (policy) {
    names.append(element("p", policy, "policy"));
  }
  if (key.replaced_by) {
    const replaced = element("p", "replaced by ", "replaced");
    replaced.append(element("code", key.replaced_by));
    if (key.expires_at) {
      replaced.append(", ends ", timeOf(key.expires_at));
    }
    names.append(replaced);
  }
  cell.append(names);
  return cell;
}

function actionsCell(key, slug, nameId) {
  const cell = element("td", undefined, "row-actions");
  const buttons = element("div", undefined, "buttons");
  const why = refusals(key);
  const reasons = [...new Set(Object.values(why))];
  for (const label of ["Usage", "Edit", "Rotate", "Delete"]) {
    const button = element("button", label);
    button.type = "button";
    button.dataset.key = key.key;
    button.dataset.action = label;
    button.disabled = label in why;
    const described = [nameId];
    if (button.disabled) {
      described.push(`why-${slug}-${reasons.indexOf(why[label])}`);
    }
    button.setAttribute("aria-describedby", described.join(" "));
    buttons.append(button);
  }
  cell.append(buttons);
  reasons.forEach((reason, index) => {
    const note = element("p", reason, "why");
    note.id = `why-${slug}-${index}`;
    cell.append(note);
  });
  return cell;
}

/** A key's last 30 days, drawn when its read arrives (busy until then); a read refused is
 * a dash, and why. */
function usageCell(key) {
  const cell = element("td", undefined, "usage");
  cell.dataset.label = "Usage";
  cell.setAttribute("aria-busy", "true");
  readUsage(key.key)
    .then((usage) => {
      const shown = element("span", countWords(usage), "figures");
      shown.setAttribute("aria-hidden", "true"); // the chart's name says the same words
      const drawn = element("div"); // one item of the narrow layout's grid
      drawn.append(usageChart(usage, "small"), shown);
      cell.replaceChildren(drawn);
    })
    .catch((error) => {
      const dash = element("span", "—");
      dash.setAttribute("aria-hidden", "true");
      const said = element("div");
      said.append(dash, " ", element("span", `Usage not read: ${error.message}`, "why"));
      cell.replaceChildren(said);
    })
    .finally(() => cell.removeAttribute("aria-busy"));
  return cell;
}

// Every scope there is (app/domain/scopes.py, written into the page).
const EVERY_SCOPE = document.body.dataset.scopes.split(" ");
// More scopes than this are said in a few words ("all 11 scopes"), their list on demand.
const SCOPES_SHOWN = 4;

/** A key's scopes as badges; many of them, a disclosure whose summary counts them. */
function scopeList(names) {
  const list = element("ul", undefined, "scope-list");
  list.append(...names.map((scope) => element("li", scope)));
  if (names.length <= SCOPES_SHOWN) {
    return list;
  }
  const more = element("details", undefined, "scopes-more");
  const count = names.length === EVERY_SCOPE.length ? `all ${names.length}` : names.length;
  more.append(element("summary", `${count} scopes`), list);
  return more;
}

function keyRow(key) {
  const row = element("tr");
  const slug = key.key.replace(/[^A-Za-z0-9_-]/g, "");
  const nameId = `name-${slug}`;
  const kind = element("td", key.kind);
  kind.dataset.label = "Kind";
  const scopes = element("td");
  scopes.dataset.label = "Scopes";
  scopes.append(scopeList(key.scopes));
  row.append(
    nameCell(key, nameId),
    kind,
    scopes,
    timeCell("Created", key.created),
    timeCell("Last used", key.last_used, "Never"),
    timeCell("Expires", key.expires_at, "Never", "Expired"),
    usageCell(key),
    actionsCell(key, slug, nameId),
  );
  return row;
}

// Changing a filter twice quickly never leaves the first choice's page on screen.
const reads = new NewestRead();

/** Show listing.page; false when it could not be read, or a newer read replaced it. */
export async function loadPage() {
  const query = new URLSearchParams({ page: listing.page, page_size: listing.pageSize });
  if (listing.kind) {
    query.set("kind", listing.kind);
  }
  if (listing.state === "disabled") {
    query.set("enabled", "false");
  } else if (listing.state) {
    query.set("state", listing.state);
  }
  if (listing.unusedDays) {
    // Never used, or last used before then: UTC with Z (no "+" to escape).
    const since = new Date(Date.now() - Number(listing.unusedDays) * 86400000);
    query.set("unused_since", since.toISOString());
  }
  const table = $("key-table");
  let answer;
  try {
    answer = await reads.get(`${API}?${query}`, table);
  } catch (error) {
    report(listError, error);
    return false;
  }
  if (answer === undefined) {
    return false; // a newer read is on its way
  }
  const pages = Math.max(1, Math.ceil(answer.total_count / answer.page_size));
  if (answer.data.length === 0 && listing.page > pages) {
    // The last keys of the last page were deleted: show the page before.
    listing.page = pages;
    return loadPage();
  }
  listError.clear();
  listed.clear();
  forgetReads(); // the last page's reads still waiting
  for (const key of answer.data) {
    listed.set(key.key, key);
  }
  const rows = answer.data.map(keyRow);
  const filtered = listing.kind || listing.state || listing.unusedDays;
  showRows($("rows"), rows, filtered ? "No keys match these filters." : "No keys.");
  const count = `${answer.total_count} ${answer.total_count === 1 ? "key" : "keys"}`;
  $("page-status").textContent = `Page ${listing.page} of ${pages} · ${count}`;
  $("previous").disabled = listing.page <= 1;
  $("next").disabled = listing.page >= pages;
  return true;
}

/** After a change: the list again, and the focus on what `focus` selects, or New key. */
export async function refresh(focus) {
  if (await loadPage()) {
    ((focus && document.querySelector(focus)) || $("new-key")).focus();
  }
}

/** No key in use: nothing of the last one's list stays, and the next starts afresh. */
export function clearList() {
  Object.assign(listing, { page: 1, kind: "", state: "", unusedDays: "" });
  for (const filter of ["filter-kind", "filter-state", "filter-unused"]) {
    $(filter).value = "";
  }
  listed.clear();
  forgetReads();
  $("rows").replaceChildren();
  $("page-status").textContent = "";
  listError.clear();
}

/** Move to another page, keeping the focus on the control that was used, or the table. */
async function turn(page, control) {
  listing.page = page;
  await loadPage();
  (control.disabled ? $("keys-title") : control).focus();
}

$("previous").addEventListener("click", (event) => turn(listing.page - 1, event.currentTarget));
$("next").addEventListener("click", (event) => turn(listing.page + 1, event.currentTarget));
for (const [filter, field] of [
  ["filter-kind", "kind"],
  ["filter-state", "state"],
  ["filter-unused", "unusedDays"],
]) {
  $(filter).addEventListener("change", (event) => {
    listing[field] = event.currentTarget.value;
    listing.page = 1;
    loadPage();
  });
}
$("page-size").addEventListener("change", (event) => {
  listing.pageSize = Number(event.currentTarget.value);
  listing.page = 1;
  loadPage();
});
