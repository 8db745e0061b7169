// Import (docs/design.md, "Import and export"): a file of JSON lines, one key object a line as
// `flask keys export` writes, read and judged line by line in the browser, shown before anything is
// sent, then sent as one POST /api/keys/import, all or nothing. The API's refusals name
// entries as `keys[3].kind`: the page says them by the file's lines.

import { api } from "./api.js";
import { showDialog } from "./dialogs.js";
import { $, describedBy, element } from "./dom.js";
import { loadPage } from "./keys.js";
import { session } from "./session.js";

export const MAX_LINES = 1000; // what one request takes (app/keys/import_schemas.py)
const preview = { entries: [], lines: [] }; // what will be sent, and each one's line

const plural = (count, one, many) => `${count.toLocaleString()} ${count === 1 ? one : many}`;

/** Import is offered to an sdk_integration key; otherwise disabled, saying why. */
export function offerImport() {
  const button = $("open-import");
  const why = $("import-why");
  button.disabled = session.self.kind !== "sdk_integration";
  why.hidden = !button.disabled;
  why.textContent = "Import: only an sdk_integration key may import keys.";
  button.dataset.hints = button.disabled ? why.id : "";
  describedBy(button);
}

/** Each line of `text` judged: `{entries, lines, refused: [[line, why]], tooMany}`; blank
 * lines are skipped. */
export function judge(text) {
  const judged = { entries: [], lines: [], refused: [], tooMany: 0 };
  const lines = text.split(/\r?\n/);
  const filled = lines.filter((line) => line.trim() !== "").length;
  if (filled > MAX_LINES) {
    judged.tooMany = filled;
    return judged;
  }
  lines.forEach((line, index) => {
    const number = index + 1;
    if (line.trim() === "") {
      return;
    }
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      judged.refused.push([number, "not JSON"]);
      return;
    }
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      judged.refused.push([number, "not a key object ({...})"]);
    } else if (!("key" in entry) && !("key_sha256" in entry)) {
      judged.refused.push([number, "has neither key nor key_sha256"]);
    } else {
      judged.entries.push(entry);
      judged.lines.push(number);
    }
  });
  return judged;
}

function say(text, refused = []) {
  $("import-preview").textContent = text;
  $("import-refused").replaceChildren(
    ...refused.map(([line, why]) => element("li", `Line ${line}: ${why}`)),
  );
}

function reset() {
  preview.entries = [];
  preview.lines = [];
  $("import-file").value = "";
  $("import-send").disabled = true;
  $("import-error").replaceChildren();
  say("");
}

$("import-file").addEventListener("change", async (event) => {
  const file = event.currentTarget.files[0];
  $("import-error").replaceChildren();
  $("import-send").disabled = true;
  if (!file) {
    say("");
    return;
  }
  const judged = judge(await file.text());
  preview.entries = judged.entries;
  preview.lines = judged.lines;
  if (judged.tooMany) {
    say(
      `Too many lines: ${plural(judged.tooMany, "key", "keys")} in the file, and one import ` +
        `takes at most ${MAX_LINES.toLocaleString()}. Split the file and import each part.`,
    );
    preview.entries = [];
    return;
  }
  const made = judged.entries.length;
  const refused = judged.refused.length;
  let text = made
    ? `${plural(made, "key", "keys")} will be made from ${file.name}.`
    : `No key can be made from ${file.name}.`;
  if (refused) {
    text += ` ${plural(refused, "line is", "lines are")} refused and will not be sent:`;
  }
  say(text, judged.refused);
  $("import-send").disabled = made === 0;
});

/** The API's `keys[3]` named by the file's line: "line 5". */
const byLine = (text) =>
  text.replace(/keys\[(\d+)\]/g, (_, index) => `line ${preview.lines[Number(index)] ?? "?"}`);

function refused(error) {
  const region = $("import-error");
  const said = [element("p", byLine(error.message || "The import was refused."))];
  if (error.errors) {
    const list = element("ul");
    for (const [name, messages] of Object.entries(error.errors)) {
      const where = byLine(name).replace(/^line/, "Line").replace(".", ", ");
      list.append(element("li", `${where}: ${[].concat(messages).join(" ")}`));
    }
    said.push(list);
  }
  region.replaceChildren(...said);
}

$("import-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const send = $("import-send");
  send.disabled = true;
  let answer;
  try {
    answer = await api("POST", "api/keys/import", { keys: preview.entries });
  } catch (error) {
    if (error.status !== 401) {
      refused(error);
      send.disabled = false;
    }
    return;
  }
  $("import-dialog").close();
  $("import-done").textContent = `Made ${plural(answer.imported, "key", "keys")}.`;
  await loadPage();
});

/** No key in use: nothing of the last import stays. */
export function closeImport() {
  reset();
  $("import-done").textContent = "";
}

$("open-import").addEventListener("click", (event) => {
  reset();
  $("import-done").textContent = "";
  showDialog($("import-dialog"), event.currentTarget);
  $("import-file").focus();
});
