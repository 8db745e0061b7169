// Webhooks (docs/design.md, "Webhooks"): the organization's endpoints, the events each takes, and
// an endpoint's recent deliveries with a retry. A view of its own, in place of the list of
// keys; only an sdk_integration key may manage webhooks, as the API says.

import { api, NewestRead } from "./api.js";
import { report, Fields } from "./dialogs.js";
import { $, describedBy, element, showRows, timeOf } from "./dom.js";
import { eventWords } from "./event-words.js";
import { loadPage } from "./keys.js";
import { session } from "./session.js";

const RECENT = 20;
const endpointsError = new Fields($("webhooks-error"));
const deliveriesError = new Fields($("deliveries-error"));
let shown = null; // the endpoint whose deliveries are shown

/** Webhooks is offered to an sdk_integration key; otherwise disabled, saying why. */
export function offerWebhooks() {
  const button = $("open-webhooks");
  const why = $("webhooks-why");
  button.disabled = session.self.kind !== "sdk_integration";
  why.hidden = !button.disabled;
  why.textContent = "Webhooks: only an sdk_integration key may manage them.";
  button.dataset.hints = button.disabled ? why.id : "";
  describedBy(button);
}

function cellOf(label, content) {
  const cell = element("td");
  cell.dataset.label = label;
  cell.append(content);
  return cell;
}

/** An event type in words, its code in its title (what the API's `events` take). */
function eventItem(type) {
  const item = element("li", eventWords(type));
  item.title = type;
  return item;
}

function endpointRow(endpoint) {
  const row = element("tr");
  const events = element("ul", undefined, "changes");
  events.append(...endpoint.events.map(eventItem));
  const state = endpoint.enabled
    ? endpoint.failing_since
      ? "Enabled, failing"
      : "Enabled"
    : "Disabled";
  const actions = element("td", undefined, "row-actions");
  const open = element("button", "Deliveries");
  open.type = "button";
  open.setAttribute("aria-label", `Deliveries of ${endpoint.url}`);
  open.addEventListener("click", () => showDeliveries(endpoint));
  actions.append(open);
  row.append(
    cellOf("URL", element("code", endpoint.url, "url")),
    cellOf("Events", events),
    cellOf("Description", endpoint.description || "—"),
    cellOf("State", state),
    actions,
  );
  return row;
}

async function loadEndpoints() {
  const table = $("endpoint-table");
  table.setAttribute("aria-busy", "true");
  let answer;
  try {
    answer = await api("GET", "api/webhooks");
  } catch (error) {
    report(endpointsError, error);
    return;
  } finally {
    table.removeAttribute("aria-busy");
  }
  endpointsError.clear();
  const rows = answer.data.map(endpointRow);
  showRows($("endpoint-rows"), rows, "No endpoints yet.");
}

/** What a delivery's event is about, in words: a key by its name (key.*), an identity by
 * its name (identity.*), or the type's own member for a type the page does not know. */
function subjectOf(delivery) {
  const { key, identity } = delivery.payload.data || {};
  if (key) {
    return key.name;
  }
  if (identity) {
    return `Identity ${identity.name || identity.external_id}`;
  }
  return "—";
}

function deliveryRow(delivery) {
  const row = element("tr");
  const subject = subjectOf(delivery);
  const answer =
    delivery.last_status !== null
      ? String(delivery.last_status)
      : delivery.last_error || (delivery.tries ? "none" : "not tried yet");
  const actions = element("td", undefined, "row-actions");
  const event = element("span", eventWords(delivery.event));
  event.title = delivery.event;
  const retry = element("button", "Retry");
  retry.type = "button";
  retry.setAttribute("aria-label", `Retry ${eventWords(delivery.event)} for ${subject}`);
  retry.addEventListener("click", () => retryDelivery(delivery, retry));
  actions.append(retry);
  row.append(
    cellOf("Time", timeOf(delivery.created)),
    cellOf("Event", event),
    cellOf("About", subject),
    cellOf("Status", delivery.status),
    cellOf("Tries", String(delivery.tries)),
    cellOf("Last answer", answer),
    actions,
  );
  return row;
}

// An endpoint's deliveries asked for, then another's, quickly: the first answer, should it
// come in last, never shows under the second's address.
const deliveryReads = new NewestRead();

async function loadDeliveries() {
  const table = $("delivery-table");
  let answer;
  try {
    answer = await deliveryReads.get(
      `api/webhooks/${shown.id}/deliveries?page_size=${RECENT}`,
      table,
    );
  } catch (error) {
    report(deliveriesError, error);
    return;
  }
  if (answer === undefined) {
    return; // a newer read is on its way
  }
  deliveriesError.clear();
  const rows = answer.data.map(deliveryRow);
  showRows($("delivery-rows"), rows, "No deliveries yet.");
  const count = answer.total_count;
  $("deliveries-status").textContent =
    `${Math.min(count, RECENT)} most recent of ${count} ${count === 1 ? "delivery" : "deliveries"}`;
}

async function showDeliveries(endpoint) {
  shown = endpoint;
  $("retry-status").textContent = "";
  $("deliveries-url").textContent = endpoint.url;
  $("deliveries").hidden = false;
  $("deliveries-title").focus();
  await loadDeliveries();
}

async function retryDelivery(delivery, button) {
  button.disabled = true;
  try {
    await api("POST", `api/webhooks/${shown.id}/deliveries/${delivery.id}/retry`);
  } catch (error) {
    report(deliveriesError, error);
    button.disabled = false;
    return;
  }
  $("retry-status").textContent =
    `${eventWords(delivery.event)} for ${subjectOf(delivery)} will be sent again.`;
  await loadDeliveries();
  $("deliveries-title").focus();
}

/** Out of the webhooks view (if shown), which starts afresh next time. */
export function closeWebhooks() {
  deliveryReads.dropAll();
  $("webhooks").hidden = true;
  $("deliveries").hidden = true;
  shown = null;
  $("endpoint-rows").replaceChildren();
  $("delivery-rows").replaceChildren();
  $("deliveries-status").textContent = "";
  $("retry-status").textContent = "";
  endpointsError.clear();
  deliveriesError.clear();
}

$("open-webhooks").addEventListener("click", async () => {
  $("keys").hidden = true;
  $("webhooks").hidden = false;
  $("webhooks-title").focus();
  await loadEndpoints();
});

$("webhooks-back").addEventListener("click", async () => {
  closeWebhooks();
  $("keys").hidden = false;
  $("open-webhooks").focus();
  await loadPage();
});
