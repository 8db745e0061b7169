// An identity's limits in words ("10 uses per minute", "5 uses a day"), and the choice of
// an identity in New key: what the identities view and the key dialogs share.

import { api } from "./api.js";
import { element } from "./dom.js";
import { session } from "./session.js";

const number = (count) => count.toLocaleString();
const SPANS = { 1: "second", 60: "minute", 3600: "hour", 86400: "day" };
const PER = { day: "a day", week: "a week", month: "a month", lifetime: "for its lifetime" };

const uses = (count) => `${number(count)} ${count === 1 ? "use" : "uses"}`;

/** "10 uses per minute", "100 uses per 30 seconds". */
export function rateWords(limit) {
  const span = SPANS[limit.seconds];
  return `${uses(limit.requests)} per ${span || `${number(limit.seconds)} seconds`}`;
}

/** "5 uses a day", "1,000 uses for its lifetime". */
export const quotaLimitWords = (quota) => `${uses(quota.requests)} ${PER[quota.period]}`;

/** An identity's limits, in words: "10 uses per minute · 5 uses a day"; "No limits". */
export function limitWords(identity) {
  const words = [];
  if (identity.rate_limit) {
    words.push(rateWords(identity.rate_limit));
  }
  if (identity.quota) {
    words.push(quotaLimitWords(identity.quota));
  }
  return words.length ? words.join(" · ") : "No limits";
}

const CHOICES = 100; // the first identities offered in New key

/** Fill New key's Identity choice with the organization's identities (an sdk_integration
 * key only: no other may read them); false when the key in use may not choose one. */
export async function offerIdentities(select) {
  select.replaceChildren(element("option", "None"));
  select.options[0].value = "";
  if (session.self.kind !== "sdk_integration") {
    return false;
  }
  const answer = await api("GET", `api/identities?page_size=${CHOICES}`);
  for (const identity of answer.data) {
    const option = element("option", `${identity.external_id} (${identity.name})`);
    option.value = identity.id;
    select.append(option);
  }
  return true;
}
