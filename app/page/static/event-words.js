// The key events a webhook endpoint takes, in people's words ("Key created" for
// key.created), as app/page writes them into the page: the Webhooks view and the audit log
// both say them.

import { $ } from "./dom.js";

const WORDS = new Map(
  [...$("event-words").content.querySelectorAll("data")].map((data) => [
    data.value,
    data.textContent,
  ]),
);

/** An event type in words; the type itself for one the page does not know. */
export const eventWords = (type) => WORDS.get(type) || type;
