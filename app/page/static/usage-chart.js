// A key's usage (docs/design.md, "Usage"): read a few at a time, and drawn as an SVG chart whose
// text alternative says the total. Allowed uses stand above the line and refused ones hang
// below it, so that they differ by place, not by colour alone.

import { api, keyPath } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";
// Reads in flight at once: a page of 200 keys asks 200 times, never all together.
const AT_ONCE = 4;
// The allowed uses' share of the chart's height; the refused ones have the rest.
const ABOVE = 0.7;

const waiting = [];
let running = 0;
let round = 0;

function next() {
  while (running < AT_ONCE && waiting.length) {
    const { task, settle } = waiting.shift();
    running += 1;
    task()
      .then(...settle)
      .finally(() => {
        running -= 1;
        next();
      });
  }
}

/** The usage of the last 30 days, by day (the API's default window) of the key shown as
 * `shown`; read once AT_ONCE reads allow. A read still waiting when forgetReads() is called
 * is never made (its promise never settles). */
export function readUsage(shown) {
  const mine = round;
  return new Promise((resolve, reject) => {
    const task = () => (mine === round ? api("GET", `${keyPath(shown)}/usage`) : Promise.resolve());
    const settle = [
      (usage) => mine === round && resolve(usage),
      (error) => mine === round && reject(error),
    ];
    waiting.push({ task, settle });
    next();
  });
}

/** The reads asked for so far are no longer wanted (another page of keys is shown). */
export function forgetReads() {
  round += 1;
  waiting.length = 0;
}

export const refusedOf = (bucket) => Object.values(bucket.refused).reduce((a, b) => a + b, 0);

export const number = (count) => count.toLocaleString();

/** "1,234 requests · 5 refused": every use, and how many of them were refused. The list
 * shows these words, and its charts say them to screen readers. */
export function countWords(usage) {
  const refused = Object.values(usage.total.refused).reduce((a, b) => a + b, 0);
  const requests = usage.total.allowed + refused;
  return (
    `${number(requests)} ${requests === 1 ? "request" : "requests"} · ` +
    `${number(refused)} refused`
  );
}

/** "Last 30 days: 1,234 requests · 5 refused". */
export const usageWords = (usage) => `Last 30 days: ${countWords(usage)}`;

function shape(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, String(value));
  }
  return node;
}

/** The chart of `usage`'s buckets: one column per bucket, a viewBox stretched to the size
 * the style sheet gives it (class `className`), named by usageWords(). */
export function usageChart(usage, className) {
  const buckets = usage.buckets;
  const width = buckets.length;
  const most = Math.max(1, ...buckets.map((bucket) => bucket.allowed));
  const mostRefused = Math.max(1, ...buckets.map(refusedOf));
  const svg = shape("svg", {
    viewBox: `0 0 ${width} 100`,
    preserveAspectRatio: "none",
    role: "img",
    "aria-label": usageWords(usage),
    class: `chart ${className}`,
  });
  const line = ABOVE * 100;
  svg.append(shape("rect", { x: 0, y: line - 0.5, width, height: 1, class: "base" }));
  buckets.forEach((bucket, index) => {
    // A day with any use shows at least a sliver.
    const up = bucket.allowed && Math.max(2, (bucket.allowed / most) * (line - 1));
    const refused = refusedOf(bucket);
    const down = refused && Math.max(2, (refused / mostRefused) * (100 - line - 1));
    const x = index + 0.1;
    svg.append(
      shape("rect", { x, y: line - 0.5 - up, width: 0.8, height: up, class: "allowed" }),
      shape("rect", { x, y: line + 0.5, width: 0.8, height: down, class: "refused" }),
    );
  });
  return svg;
}
