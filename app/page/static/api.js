// Talking to the API: every call goes through api(), with the key in use as a Bearer token,
// exactly as any client of /api/keys does; every rule stays in the API.

import { storedKey } from "./session.js";

export const API = "api/keys";
export const keyPath = (shown) => `${API}/${encodeURIComponent(shown)}`;

/** An answer of the API that is not a success, or no answer at all. */
export class Refusal extends Error {
  constructor(status, problem) {
    const detail =
      problem && typeof problem.detail === "string"
        ? problem.detail
        : status
          ? `The service answered ${status}.`
          : "The service did not answer. Check the connection and try again.";
    super(detail);
    this.status = status;
    this.code = problem && typeof problem.code === "string" ? problem.code : null;
    this.errors = problem && typeof problem.errors === "object" ? problem.errors : null;
  }

  /** A refusal of the page's own, before asking the API: its field errors, as the API's. */
  static invalid(errors) {
    return new Refusal(422, { detail: "", code: "validation_error", errors });
  }

  /** A refusal of the input (422 validation_error): its field errors say what is wrong. */
  get invalid() {
    return this.code === "validation_error" && this.errors !== null;
  }
}

// What to do when the key in use is refused (401): set by the sign-in view.
let unauthorized = () => {};

export function onUnauthorized(handler) {
  unauthorized = handler;
}

/** One call of the API with the key in use; a 401 goes to the onUnauthorized handler. */
export async function api(method, path, body) {
  const headers = { Accept: "application/json", Authorization: "Bearer " + (storedKey() || "") };
  // credentials "omit": the browser adds nothing of its own, and the API's 401 with
  // WWW-Authenticate: Basic reaches this code instead of opening the browser's prompt.
  const init = { method, headers, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new Refusal(0, null);
  }
  const problem = response.status === 204 ? null : await response.json().catch(() => null);
  if (response.ok) {
    return problem;
  }
  const refusal = new Refusal(response.status, problem);
  if (response.status === 401) {
    unauthorized(refusal);
  }
  throw refusal;
}

/** The reads of one view, of which only the newest may show: an answer to an older one is
 * dropped, so that a choice changed quickly shows what was chosen last, whichever answer
 * comes in last. */
export class NewestRead {
  #number = 0;

  /** GET `path`, with `table` marked busy until the newest read is in: its answer, or
   * undefined when a newer read has started since (its error is dropped too). */
  async get(path, table) {
    const read = ++this.#number;
    table.setAttribute("aria-busy", "true");
    try {
      const answer = await api("GET", path);
      return read === this.#number ? answer : undefined;
    } catch (error) {
      if (read === this.#number) {
        throw error;
      }
      return undefined;
    } finally {
      if (read === this.#number) {
        table.removeAttribute("aria-busy");
      }
    }
  }

  /** Every read still on its way is dropped (the view was left). */
  dropAll() {
    this.#number += 1;
  }
}
