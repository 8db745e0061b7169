// Dialogs and forms: opening and closing (the focus returns where it was), refusals shown
// once in people's words, with each field error beside the input it concerns, and the
// expiry inputs every form shares.

import { Refusal } from "./api.js";
import { $, describedBy, element } from "./dom.js";

for (const dialog of document.querySelectorAll("dialog")) {
  for (const cancel of dialog.querySelectorAll(".cancel")) {
    cancel.addEventListener("click", () => dialog.close());
  }
}

/** Open a dialog; when it closes, the focus returns to `opener` if it is still there. */
export function showDialog(dialog, opener) {
  dialog.addEventListener(
    "close",
    () => {
      if (document.querySelector("dialog[open]")) {
        return;
      }
      if (!$("sign-in").hidden) {
        $("api-key").focus(); // the key in use is gone
      } else if (opener && opener.isConnected) {
        opener.focus();
      }
    },
    { once: true },
  );
  dialog.showModal();
}

/**
 * Where a refusal is shown: a region (role alert) for what went wrong, and the fields of a
 * form, each named as its label on screen says, not as the API does:
 * `{apiName: {label, message (the element beside the input), inputs: (messages) => [elements],
 * words: (messages) => text}}`. `inputs` given the API's messages may pick the inputs they
 * concern (a line, a row), given none it names them all; `words` (optional) says the
 * messages in the form's terms (default: "label: messages").
 */
export class Fields {
  constructor(region, fields = {}) {
    this.region = region;
    this.fields = fields;
  }

  clear() {
    this.region.replaceChildren();
    for (const field of Object.values(this.fields)) {
      field.message.textContent = "";
      for (const input of field.inputs()) {
        input.removeAttribute("aria-invalid");
        describedBy(input);
      }
    }
  }

  /** The refusal's message, once: for an invalid input, each field's beside it (the region
   * names the fields to correct, and the first takes the focus); otherwise the API's detail
   * in the region, which the fields it concerns point at. */
  show(refusal) {
    this.clear();
    const errors = refusal.errors || {};
    const marked = Object.keys(this.fields).filter((name) => name in errors);
    const others = Object.keys(errors).filter((name) => !(name in this.fields));
    const said = element("p");
    this.region.append(said);
    if (refusal.invalid) {
      const labels = [...marked.map((name) => this.fields[name].label), ...others];
      said.textContent = `The request is not valid: ${labels.join(", ")}.`;
      if (others.length) {
        const list = element("ul");
        for (const name of others) {
          list.append(element("li", `${name}: ${[].concat(errors[name]).join(" ")}`));
        }
        this.region.append(list);
      }
    } else {
      said.textContent = refusal.message;
    }
    let first = null;
    for (const name of marked) {
      const field = this.fields[name];
      const messages = [].concat(errors[name]);
      if (refusal.invalid) {
        field.message.textContent = field.words
          ? field.words(messages)
          : `${field.label}: ${messages.join(" ")}`;
      }
      for (const input of field.inputs(messages)) {
        input.setAttribute("aria-invalid", "true");
        describedBy(input, [refusal.invalid ? field.message.id : this.region.id]);
        first = first || input;
      }
    }
    if (refusal.invalid && first) {
      first.focus();
    }
  }
}

/** Show a refusal where the person is looking; a 401 was already said at the key input. */
export function report(fields, error) {
  if (!(error instanceof Refusal)) {
    throw error;
  }
  if (error.status !== 401) {
    fields.show(error);
  }
}

// --- expiries: a datetime-local input, in the person's own time zone, to the minute -----

const pad = (number) => String(number).padStart(2, "0");

export function localInput(iso) {
  if (!iso) {
    return "";
  }
  const moment = new Date(iso);
  const day = `${moment.getFullYear()}-${pad(moment.getMonth() + 1)}-${pad(moment.getDate())}`;
  return `${day}T${pad(moment.getHours())}:${pad(moment.getMinutes())}`;
}

/** The input's time for the API (UTC, Z), null when empty; a half-typed time is refused. */
export function expiryOf(input) {
  if (input.validity.badInput) {
    throw Refusal.invalid({ expires_at: ["Complete the date and time, or leave it empty."] });
  }
  return input.value ? new Date(input.value).toISOString() : null;
}

/** What an empty expiry input means (written into its hint), and whether its No expiry
 * button may be used: not when the key in use expires (docs/design.md, "Key policy"). */
export function expiryRule(input, rule, noExpiryAllowed) {
  const hint = $(`${input.id}-hint`);
  hint.querySelector(".rule").textContent = rule;
  const button = document.querySelector(`.no-expiry[data-for="${input.id}"]`);
  button.disabled = !noExpiryAllowed;
  button.dataset.hints = button.disabled ? hint.id : ""; // why it cannot be used
  describedBy(button);
}

for (const zone of document.querySelectorAll(".zone")) {
  zone.textContent = Intl.DateTimeFormat().resolvedOptions().timeZone;
}

for (const clear of document.querySelectorAll(".no-expiry")) {
  clear.addEventListener("click", () => {
    const input = $(clear.dataset.for);
    input.value = "";
    input.dispatchEvent(new Event("input")); // as if the person had emptied it
    input.focus();
  });
}
