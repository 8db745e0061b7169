// The key in use: its full value in this tab's sessionStorage only (never in a cookie,
// localStorage, a URL or the page itself), and the key as the API shows it.

import { when } from "./dom.js";

const STORE = "apiKey";

/** The key in use as the API shows it (name, shown value, scopes, expiry); null: none. */
export const session = { self: null };

export const storedKey = () => sessionStorage.getItem(STORE);
export const storeKey = (key) => sessionStorage.setItem(STORE, key);
export const forgetKey = () => sessionStorage.removeItem(STORE);

/** The scopes of `scopes` that the key in use lacks: what it can never grant or touch
 * (docs/design.md, "Permissions"). */
export const lacking = (scopes) => scopes.filter((scope) => !session.self.scopes.includes(scope));

/** When the key in use expires, as people read it; null: never. */
export function selfEnds() {
  return session.self.expires_at ? when.format(new Date(session.self.expires_at)) : null;
}
