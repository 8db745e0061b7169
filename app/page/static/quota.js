// A key's quota (docs/design.md, "Quotas") in words, the same for eyes and screen readers: what
// it allows ("100 a day") and what is left of it ("37 of 100 uses left today").

const number = (count) => count.toLocaleString();

// The periods are UTC calendar periods: "today" is the UTC day (the hints say so).
const PER = { day: "a day", week: "a week", month: "a month", lifetime: "for its lifetime" };
const NOW = { day: "today", week: "this week", month: "this month", lifetime: "for its lifetime" };

/** "100 a day", "1,000 for its lifetime". */
export const quotaWords = (quota) => `${number(quota.requests)} ${PER[quota.period]}`;

/** What is left of `key`'s quota: "37 of 100 uses left today"; "" without a quota. */
export function leftWords(key) {
  if (!key.quota) {
    return "";
  }
  const { requests, period } = key.quota;
  return `${number(key.quota_remaining)} of ${number(requests)} uses left ${NOW[period]}`;
}

/** When the current period of a quota ends (UTC calendar periods); null: never. */
export function renewal(period, now = new Date()) {
  const [year, month, day] = [now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()];
  if (period === "day") {
    return new Date(Date.UTC(year, month, day + 1));
  }
  if (period === "week") {
    return new Date(Date.UTC(year, month, day + 7 - ((now.getUTCDay() + 6) % 7)));
  }
  if (period === "month") {
    return new Date(Date.UTC(year, month + 1, 1));
  }
  return null;
}
