/**
 * An export's filters in words, for the exports table:
 * "from 2026-01-01 · review: accepted · min task success 1 · held-out excluded".
 * Filters at their defaults (any review status, accepted steps left out, no bound) are not
 * named; one the page does not know is shown as "name: value", so nothing stored is hidden.
 */

const ORDER = [
  "date_from",
  "date_to",
  "model_version",
  "review_status",
  "annotator",
  "min_task_success",
  "min_gold_accuracy",
  "min_agreement",
  "include_accepted",
  "exclude_held_out",
];

const ISO = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$/;

/** A bound as the form gave it: the day alone at midnight, else day and time with its zone. */
function moment(value: string): string {
  const match = ISO.exec(value);
  if (!match) return value;
  const [, day, time, zone] = match;
  if (time === "00:00") return day;
  const utc = zone === undefined || zone === "Z" || zone === "+00:00";
  return `${day} ${time} ${utc ? "UTC" : zone}`;
}

function shown(value: unknown): string {
  if (typeof value === "boolean") return value ? "yes" : "no";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function filterWords(name: string, value: unknown): string | null {
  if (value === null || value === undefined || value === "") return null;
  switch (name) {
    case "date_from":
      return `from ${moment(String(value))}`;
    case "date_to":
      return `before ${moment(String(value))}`;
    case "model_version":
      return `model version ${String(value)}`;
    case "review_status":
      if (value === "any") return null;
      return value === "unreviewed" ? "not reviewed" : `review: ${String(value)}`;
    case "annotator":
      return `annotator ${String(value)}`;
    case "min_task_success":
      return `min task success ${String(value)}`;
    case "min_gold_accuracy":
      return `annotators' gold accuracy ≥ ${String(value)}`;
    case "min_agreement":
      return `annotators' agreement ≥ ${String(value)}`;
    case "include_accepted":
      return value === true ? "accepted steps included" : null;
    case "exclude_held_out":
      return value === true ? "held-out excluded" : "held-out included";
    default:
      return `${name.replace(/_/g, " ")}: ${shown(value)}`;
  }
}

/** The filters as words joined by " · ", known ones first in the form's order; "all episodes"
 * when none narrows the export. */
export function filtersText(filters: Record<string, unknown>): string {
  const rank = (name: string) => (ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length);
  const names = Object.keys(filters).sort((a, b) => rank(a) - rank(b));
  const words = names.map((name) => filterWords(name, filters[name])).filter((w): w is string => w !== null);
  return words.length > 0 ? words.join(" · ") : "all episodes";
}
