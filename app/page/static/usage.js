// A key's usage (docs/design.md, "Usage" and "The page"): its last 30 days by day, the scopes its
// checks named and those none named, and whether Narrow scopes (narrow.js) can edit the key
// down to the ones in use. A view of its own, in place of the list of keys.

import { api, keyPath } from "./api.js";
import { Fields, report } from "./dialogs.js";
import { $, describedBy, element } from "./dom.js";
import { listedKey, refusals } from "./keys.js";
import { leftWords } from "./quota.js";
import { number, usageChart, usageWords } from "./usage-chart.js";
import { clearQuota, showQuotaNow } from "./usage-quota.js";

const view = { key: null, opener: null, unused: [] };
// Why uses were refused, by the code the usage counts them under (app/access/policy.py's
// refusals, and forbidden for a scope or a kind the request needed), in words.
const REFUSED_BECAUSE = {
  expired_key: "the key had expired",
  disabled_key: "the key was disabled",
  ip_not_allowed: "the address is not one the key allows",
  rate_limited: "the key's rate limit was reached",
  quota_exceeded: "the quota was used up",
  forbidden: "the key lacked a scope (or a kind) the request needed",
};
const usageError = new Fields($("usage-error"));
// The buckets are UTC days: their dates are said as UTC sees them.
const day = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", timeZone: "UTC" });

/** Why Narrow scopes cannot be used for `key` with these unused scopes; null: it can. */
function whyNotNarrow(key, unused) {
  const edit = refusals(key).Edit;
  if (edit) {
    return `Narrow scopes: ${edit[0].toLowerCase()}${edit.slice(1)}`;
  }
  if (key.immutable) {
    return `Narrow scopes: the scopes of a ${key.kind} key are fixed.`;
  }
  if (unused === null) {
    return (
      "Narrow scopes: no check named a scope in these 30 days, so there is nothing to " +
      "judge by."
    );
  }
  if (unused.length === 0) {
    return "Narrow scopes: every scope of this key was checked in these 30 days.";
  }
  return null;
}

function offerNarrowing(key, unused) {
  const button = $("narrow-scopes");
  const why = $("narrow-why");
  const reason = whyNotNarrow(key, unused);
  button.disabled = reason !== null;
  why.hidden = reason === null;
  why.textContent = reason || "";
  button.dataset.hints = reason ? why.id : "";
  describedBy(button);
}

function show(usage) {
  const key = view.key;
  const chart = usageChart(usage, "large");
  $("usage-plot").replaceChildren(chart);
  const buckets = usage.buckets;
  const most = Math.max(0, ...buckets.map((bucket) => bucket.allowed));
  const mostRefused = Math.max(
    0,
    ...buckets.map((bucket) => Object.values(bucket.refused).reduce((a, b) => a + b, 0)),
  );
  $("usage-most").textContent = number(most);
  $("usage-most-refused").textContent = mostRefused ? number(mostRefused) : "";
  const dates = [0, Math.floor(buckets.length / 2), buckets.length - 1].map((index) =>
    day.format(new Date(buckets[index].start)),
  );
  $("usage-dates").replaceChildren(...dates.map((date) => element("span", date)));
  $("usage-window").textContent =
    `${usageWords(usage)}, from ${dates[0]} to ${dates[2]} (UTC days).`;

  const codes = Object.entries(usage.total.refused).sort(([, a], [, b]) => b - a);
  const refused = codes.map(([code, count]) => {
    const why = code in REFUSED_BECAUSE ? `because ${REFUSED_BECAUSE[code]}` : `(${code})`;
    const item = element("li", `Refused ${why}: ${number(count)}`);
    item.title = code;
    return item;
  });
  $("usage-totals").replaceChildren(
    element("li", `Allowed: ${number(usage.total.allowed)}`),
    ...(refused.length ? refused : [element("li", "Refused: none")]),
  );

  const checked = Object.entries(usage.scopes).sort(([, a], [, b]) => b - a);
  const rows = checked.map(([scope, count]) => {
    const row = element("tr");
    const name = element("td");
    name.dataset.label = "Scope";
    name.append(element("code", scope));
    const checks = element("td", number(count));
    checks.dataset.label = "Checks";
    row.append(name, checks);
    return row;
  });
  if (rows.length === 0) {
    const none = element("td", "No check named a scope in these 30 days.");
    none.colSpan = 2;
    rows.push(element("tr"));
    rows[0].append(none);
  }
  $("usage-scope-rows").replaceChildren(...rows);

  const unused = usage.unused_scopes;
  view.unused = unused || [];
  $("usage-unused").replaceChildren(...view.unused.map((scope) => element("li", scope)));
  $("usage-unused").hidden = view.unused.length === 0;
  $("usage-unused-none").hidden = view.unused.length > 0;
  $("usage-unused-none").textContent =
    unused === null
      ? "Not known: no check named a scope in these 30 days (forward auth's scope and the " +
        "extension's require_scopes name them)."
      : "None: every scope of this key was checked.";
  offerNarrowing(key, unused);
}

/** The key shown in the usage view, its scopes that no check named, and what opened it. */
export const shownUsage = () => ({ key: view.key, unused: view.unused, opener: view.opener });

/** Out of the usage view (if shown); nothing of the last key stays. */
export function closeUsage() {
  $("usage").hidden = true;
  view.key = null;
  view.unused = [];
  $("usage-said").textContent = "";
  clearQuota();
  for (const id of ["usage-plot", "usage-dates", "usage-totals", "usage-scope-rows"]) {
    $(id).replaceChildren();
  }
  usageError.clear();
}

/** Show `key`'s usage in place of the list, saying `said` (what just changed) if given;
 * Back to keys returns to `opener`'s row. */
export async function openUsage(key, opener, said = "") {
  closeUsage();
  view.key = key;
  view.opener = opener;
  $("usage-said").textContent = said;
  $("usage-title").textContent = `Usage of ${key.name}`;
  $("usage-shown").textContent = key.key;
  showQuotaNow(key, (granted) => {
    view.key = granted;
    $("usage-said").textContent = `Quota: ${leftWords(granted)}.`;
  });
  $("usage-window").textContent = "";
  offerNarrowing(key, []);
  $("narrow-scopes").disabled = true; // until the usage is read
  $("keys").hidden = true;
  $("usage").hidden = false;
  $("usage-title").focus();
  const figure = $("usage-figure");
  figure.setAttribute("aria-busy", "true");
  try {
    const usage = await api("GET", `${keyPath(key.key)}/usage`);
    if (view.key === key) {
      show(usage);
      if (said) {
        $("usage-title").focus(); // back from the dialog that changed the key
      }
    }
  } catch (error) {
    report(usageError, error);
  } finally {
    figure.removeAttribute("aria-busy");
  }
}

/** Back to the list, the focus on the key's Usage button (the list may have been read
 * again meanwhile), else on `focus`. */
function backToKeys(key, focus) {
  closeUsage();
  $("keys").hidden = false;
  const usage =
    key && document.querySelector(`button[data-action="Usage"][data-key="${CSS.escape(key.key)}"]`);
  const target = usage || focus;
  if (target && target.isConnected) {
    target.focus();
  }
}

$("rows").addEventListener("click", (event) => {
  const button = event.target.closest('button[data-action="Usage"]');
  if (button) {
    openUsage(listedKey(button.dataset.key), button);
  }
});

$("usage-back").addEventListener("click", () => backToKeys(view.key, view.opener));
