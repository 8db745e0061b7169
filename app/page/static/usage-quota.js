// A key's quota in its usage view (docs/design.md, "Quotas"): what is left of it and when the
// period renews, and a small form that grants uses (POST /api/keys/<key>/quota: `add` more
// uses, or `set_remaining`), offered when the key in use may edit the key.

import { api, keyPath, Refusal } from "./api.js";
import { Fields, report } from "./dialogs.js";
import { $, describedBy, timeOf } from "./dom.js";
import { loadPage, refusals } from "./keys.js";
import { leftWords, quotaWords, renewal } from "./quota.js";

const form = $("grant-form");
const uses = $("grant-uses");
const buttons = [$("grant-add"), $("grant-set")];
let shown = null; // the key whose quota is shown
let granted = () => {}; // told the key as a grant left it

const field = { label: "Uses to grant", message: $("grant-uses-error"), inputs: () => [uses] };
const fields = new Fields($("grant-error"), { add: field, set_remaining: field });

/** Show `key`'s quota ("37 of 100 uses left today (a quota of 100 a day, renewed <time>)"),
 * and the grant form if it has one; `onGrant(key)` is told the key after a grant. */
export function showQuota(key, onGrant = () => {}) {
  shown = key;
  granted = onGrant;
  const quota = $("usage-quota");
  fields.clear();
  uses.value = "";
  form.hidden = !key.quota;
  if (!key.quota) {
    quota.textContent = "This key has no quota.";
    return;
  }
  const ends = renewal(key.quota.period);
  quota.replaceChildren(
    `${leftWords(key)} (a quota of ${quotaWords(key.quota)}, `,
    ...(ends ? ["renewed ", timeOf(ends.toISOString())] : ["never renewed"]),
    ").",
  );
  // Granting needs power over the key, as Edit does: else disabled, the reason in the hint.
  const why = refusals(key).Edit || "";
  $("grant-hint").querySelector(".rule").textContent =
    why && `Not offered: ${why[0].toLowerCase()}${why.slice(1)}`;
  for (const button of buttons) {
    button.disabled = Boolean(why);
  }
  uses.disabled = Boolean(why);
}

/** showQuota(key) at once, as the list read it, then as it is now: a key with a quota is
 * read again (one use of the key in use), since other clients may have spent it since. */
export async function showQuotaNow(key, onGrant) {
  showQuota(key, onGrant);
  if (!key.quota) {
    return;
  }
  let now;
  try {
    now = await api("GET", keyPath(key.key));
  } catch (error) {
    report(fields, error);
    return;
  }
  if (shown === key) {
    showQuota(now, onGrant);
  }
}

/** Out of the usage view: nothing of the last key's quota stays. */
export function clearQuota() {
  shown = null;
  $("usage-quota").textContent = "";
  form.hidden = true;
  fields.clear();
}

async function grant(member, button) {
  const key = shown;
  button.disabled = true;
  let answer;
  try {
    if (uses.value === "" || uses.validity.badInput) {
      throw Refusal.invalid({ [member]: ["Give a whole number of uses."] });
    }
    answer = await api("POST", `${keyPath(key.key)}/quota`, { [member]: Number(uses.value) });
  } catch (error) {
    report(fields, error);
    return;
  } finally {
    button.disabled = false;
  }
  if (shown === key) {
    showQuota(answer, granted);
    granted(answer); // the focus stays on the button used
  }
  await loadPage(); // the list behind the view, as it is now
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  grant("add", $("grant-add"));
});
$("grant-set").addEventListener("click", (event) => grant("set_remaining", event.currentTarget));
describedBy(uses);
