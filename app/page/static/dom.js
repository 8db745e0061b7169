// Small helpers for writing the page: every value from the API is written as text
// (textContent), never as HTML.

export const $ = (id) => document.getElementById(id);

export const when = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  timeZoneName: "short",
});

export function element(tag, text, className) {
  const node = document.createElement(tag);
  // Explicit roles: the narrow layout restyles the table, and some browsers then forget it.
  const role = { tr: "row", td: "cell" }[tag];
  if (role) {
    node.setAttribute("role", role);
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  if (className) {
    node.className = className;
  }
  return node;
}

const DATE_PARTS = new Set(["year", "month", "day", "weekday", "era"]);

/** A time from the API, in the person's own time zone, the exact time in its title. It
 * reads as when.format() writes it ("27 Nov 2026, 07:24 CET"), its date and its clock
 * each kept on one line, so that a narrow column breaks it in two lines at most. */
export function timeOf(iso) {
  const parts = when.formatToParts(new Date(iso));
  const last = parts.findLastIndex((part) => DATE_PARTS.has(part.type));
  const text = (from, to) =>
    parts
      .slice(from, to)
      .map((part) => part.value)
      .join("");
  const time = element("time");
  time.append(
    element("span", text(0, last + 1), "date"),
    text(last + 1, last + 2),
    element("span", text(last + 2), "clock"),
  );
  time.dateTime = iso;
  time.title = iso;
  return time;
}

/** An element's aria-describedby: the ids `first` (an error message, say), then its hints
 * (what the markup gave it, or what node.dataset.hints says now). */
export function describedBy(node, first = []) {
  if (node.dataset.hints === undefined) {
    node.dataset.hints = node.getAttribute("aria-describedby") || "";
  }
  const ids = [...first, ...node.dataset.hints.split(" ")].filter(Boolean);
  if (ids.length) {
    node.setAttribute("aria-describedby", ids.join(" "));
  } else {
    node.removeAttribute("aria-describedby");
  }
}

/** "a", "a and b", "a, b and c". */
export function listed(words) {
  return words.length < 2 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words.at(-1)}`;
}

/** An object's members by name: the API keeps no order of metadata (PostgreSQL's JSONB has
 * none), so the page shows them in one. */
export const sortedEntries = (object) =>
  Object.entries(object).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

// A table body's rows, or one row across every column saying there are none (`none`).
export function showRows(body, rows, none) {
  if (rows.length === 0) {
    const empty = element("td", none);
    empty.colSpan = body.closest("table").tHead.rows[0].cells.length;
    rows = [element("tr")];
    rows[0].append(empty);
  }
  body.replaceChildren(...rows);
}
