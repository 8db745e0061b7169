// A key's policy in the create and edit form (docs/design.md, "Key policy" and "Quotas"): Enabled,
// Allowed IPs (one per line), a rate limit of Requests per seconds, a quota of Quota requests per
// Quota period, and metadata rows of a name and a value.
// Read into the API's fields; the API's refusals of them put back beside the line, input or
// row they concern, in the form's own terms.

import { Refusal } from "./api.js";
import { $, element, sortedEntries } from "./dom.js";

const enabled = $("key-enabled");
const ips = $("key-allowed-ips");
const requests = $("key-requests");
const seconds = $("key-seconds");
const quotaRequests = $("key-quota-requests");
const quotaPeriod = $("key-quota-period");
const rows = $("metadata-rows");

// The line of Allowed IPs each sent entry came from (blank lines are not sent).
let ipLines = [];
let made = 0; // metadata rows made: each row's inputs get ids of their own

const metadataRows = () => [...rows.querySelectorAll(".meta-row")];
const inputsOf = (row) => [...row.querySelectorAll("input")];

/** Each row's Remove button named by its row: "Remove metadata team", or its place. */
function nameRemoves() {
  metadataRows().forEach((row, index) => {
    const name = inputsOf(row)[0].value.trim();
    row.querySelector(".which").textContent = ` metadata ${name || `row ${index + 1}`}`;
  });
}

function labelled(id, text, value) {
  const field = element("div", undefined, "field");
  const label = element("label", text);
  label.htmlFor = id;
  const input = element("input");
  Object.assign(input, { type: "text", id, value, autocomplete: "off", spellcheck: false });
  field.append(label, input);
  return field;
}

function addRow(name = "", value = "") {
  made += 1;
  const row = element("div", undefined, "meta-row");
  const remove = element("button", "Remove");
  remove.type = "button";
  remove.append(element("span", "", "visually-hidden which"));
  remove.addEventListener("click", () => {
    const next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    nameRemoves();
    (next ? inputsOf(next)[0] : $("add-metadata")).focus();
  });
  row.append(
    labelled(`meta-${made}-name`, "Metadata name", name),
    labelled(`meta-${made}-value`, "Metadata value", value),
    remove,
  );
  rows.append(row);
  nameRemoves();
  return row;
}

rows.addEventListener("input", nameRemoves);
$("add-metadata").addEventListener("click", () => inputsOf(addRow())[0].focus());

/** The inputs hold `key`'s policy (a new key's defaults when null); `rules` are what the
 * key in use allows, written into the hints. */
export function fillPolicy(key, rules) {
  enabled.checked = key ? key.enabled : true;
  ips.value = key ? key.allowed_ips.join("\n") : "";
  requests.value = key && key.rate_limit ? key.rate_limit.requests : "";
  seconds.value = key && key.rate_limit ? key.rate_limit.seconds : "";
  quotaRequests.value = key && key.quota ? key.quota.requests : "";
  quotaPeriod.value = key && key.quota ? key.quota.period : quotaPeriod.options[0].value;
  rows.replaceChildren();
  for (const [name, value] of sortedEntries(key ? key.metadata : {})) {
    addRow(name, value);
  }
  $("key-allowed-ips-hint").querySelector(".rule").textContent = rules.ips;
  $("key-enabled-hint").querySelector(".rule").textContent = rules.enabled;
  $("quota-hint").querySelector(".rule").textContent = rules.quota;
}

/** The policy as the inputs say it, in the API's fields; what an input cannot hand over (a
 * limit without its window, a metadata name twice) is refused here, as the API words it. */
export function policyOf() {
  const errors = {};
  const entries = [];
  ipLines = [];
  ips.value.split("\n").forEach((line, index) => {
    if (line.trim()) {
      entries.push(line.trim());
      ipLines.push(index + 1);
    }
  });
  let rateLimit = null;
  const limit = [];
  for (const [input, api, other] of [
    [requests, "requests", "Per seconds"],
    [seconds, "seconds", "Requests"],
  ]) {
    if (input.validity.badInput) {
      limit.push(`Item ${api}: Give a whole number.`);
    } else if (input.value === "" && (requests.value !== "" || seconds.value !== "")) {
      limit.push(`Item ${api}: Give both, or empty ${other} too for no limit.`);
    }
  }
  if (limit.length) {
    errors.rate_limit = limit;
  } else if (requests.value !== "") {
    rateLimit = { requests: Number(requests.value), seconds: Number(seconds.value) };
  }
  let quota = null;
  if (quotaRequests.validity.badInput) {
    errors.quota = ["Item requests: Give a whole number."];
  } else if (quotaRequests.value !== "") {
    quota = { requests: Number(quotaRequests.value), period: quotaPeriod.value };
  }
  const metadata = {};
  const twice = new Set();
  for (const row of metadataRows()) {
    const [name, value] = inputsOf(row);
    if (name.value === "" && value.value === "") {
      continue; // a row left empty says nothing
    }
    if (Object.hasOwn(metadata, name.value)) {
      twice.add(name.value);
    }
    metadata[name.value] = value.value;
  }
  if (twice.size) {
    errors.metadata = [...twice].map((name) => `Item ${name}: Item key: Given more than once.`);
  }
  if (Object.keys(errors).length) {
    throw Refusal.invalid(errors);
  }
  return {
    enabled: enabled.checked,
    allowed_ips: entries,
    rate_limit: rateLimit,
    quota,
    metadata,
  };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** Whether the policy field `name` holds `wanted` already (an object's members in any
 * order: the API's JSON sorts them, the page writes them as the form reads). */
export function unchanged(key, name, wanted) {
  const held = key[name];
  return held && wanted && typeof wanted === "object" && !Array.isArray(wanted)
    ? same(sortedEntries(held), sortedEntries(wanted))
    : same(held, wanted);
}

/** The API's message "Item <row name>: Item key|value: ..." split: [name, "key"|"value", rest];
 * null when it concerns no single row. */
function metadataItem(message) {
  for (const row of metadataRows()) {
    const name = inputsOf(row)[0].value;
    for (const part of ["key", "value"]) {
      const head = `Item ${name}: Item ${part}: `;
      if (message.startsWith(head)) {
        return [name, part, message.slice(head.length)];
      }
    }
  }
  return null;
}

/** The form's fields for the policy (dialogs.js's Fields), named as the labels on screen. */
export const policyFields = {
  allowed_ips: {
    label: "Allowed IPs",
    message: $("key-allowed-ips-error"),
    inputs: () => [ips],
    words: (messages) =>
      messages
        .map((message) => {
          const item = /^Item (\d+): (.*)$/s.exec(message);
          return item
            ? `Allowed IPs, line ${ipLines[Number(item[1])]}: ${item[2]}`
            : `Allowed IPs: ${message}`;
        })
        .join(" "),
  },
  rate_limit: {
    label: "Rate limit",
    message: $("rate-error"),
    inputs: (messages = []) => {
      const named = [
        [requests, "Item requests: "],
        [seconds, "Item seconds: "],
      ].filter(([, head]) => messages.some((message) => message.startsWith(head)));
      return named.length ? named.map(([input]) => input) : [requests, seconds];
    },
    words: (messages) =>
      messages
        .map((message) =>
          message
            .replace(/^Item requests: /, "Requests: ")
            .replace(/^Item seconds: /, "Per seconds: ")
            .replace(/^(?!Requests: |Per seconds: )/, "Rate limit: "),
        )
        .join(" "),
  },
  quota: {
    label: "Quota",
    message: $("quota-error"),
    inputs: (messages = []) => {
      const named = [
        [quotaRequests, "Item requests: "],
        [quotaPeriod, "Item period: "],
      ].filter(([, head]) => messages.some((message) => message.startsWith(head)));
      return named.length ? named.map(([input]) => input) : [quotaRequests, quotaPeriod];
    },
    words: (messages) =>
      messages
        .map((message) =>
          message
            .replace(/^Item requests: /, "Quota requests: ")
            .replace(/^Item period: /, "Quota period: ")
            .replace(/^(?!Quota requests: |Quota period: )/, "Quota: "),
        )
        .join(" "),
  },
  metadata: {
    label: "Metadata",
    message: $("metadata-error"),
    inputs: (messages = []) => {
      const named = messages.map(metadataItem).filter(Boolean);
      const all = metadataRows().flatMap(inputsOf);
      const picked = metadataRows()
        .map(inputsOf)
        .flatMap(([name, value]) =>
          named
            .filter(([which]) => which === name.value)
            .map(([, part]) => (part === "key" ? name : value)),
        );
      return picked.length ? [...new Set(picked)] : all;
    },
    words: (messages) =>
      messages
        .map((message) => {
          const item = metadataItem(message);
          if (!item) {
            return `Metadata: ${message}`;
          }
          const [name, part, rest] = item;
          const quoted = name ? `“${name}”` : "(empty)";
          return part === "key"
            ? `Metadata name ${quoted}: ${rest}`
            : `Metadata value of ${quoted}: ${rest}`;
        })
        .join(" "),
  },
};
