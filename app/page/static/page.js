// The page for people: native ES modules, no build step. It calls the public REST API
// (/api/keys) with the key the person pasted, as any client does.
//
//   session.js      the key in use (sessionStorage only) and what it may do
//   api.js          talking to the API
//   dom.js          writing the page: text only, never HTML
//   dialogs.js      dialogs, refusals and field errors, expiry inputs
//   signin.js       the key input: a pasted key judged, learnt, forgotten
//   keys.js         the list of keys, each with its last 30 days charted
//   usage-chart.js  a key's usage: read a few at a time, drawn as SVG
//   usage.js        a key's usage: its days, its scopes by use, what is unused
//   usage-quota.js  a key's quota in its usage view: what is left, and grants
//   quota.js        a quota in words: "100 a day", "37 of 100 uses left today"
//   key-dialogs.js  create and edit, and the buttons of the list's rows
//   rotate-dialog.js  rotate a key
//   delete-dialog.js  delete a key
//   narrow.js       Narrow scopes: from a key's usage to Edit, and back
//   policy.js       a key's policy in create and edit: enabled, addresses, limit, quota,
//                   metadata
//   audit.js        the audit log
//   webhooks.js     the webhook endpoints and their recent deliveries, with a retry
//   event-words.js  the key events webhooks take, in words ("Key created")
//   identities.js   identities: made, edited, deleted; one's keys and usage
//   identity-words.js  an identity's limits in words, and New key's choice of one
//   import-keys.js  Import: a file of keys previewed line by line, then sent
//   new-key.js      a new key, shown once
//
// They import one another in one direction, never in a circle (tests/test_page_modules.py).

import "./key-dialogs.js";
import "./usage.js";
import "./narrow.js";
import { start } from "./signin.js";

start();
