/** Annotator scorecards as the quality page shows them: their figures, and their order. */

export interface Scorecard {
  annotator: string;
  episodes: number;
  decided_steps: number;
  demonstrated_steps: number;
  reviewed: number;
  accepted: number;
  review_acceptance: number | null;
  review_acceptance_low: number | null;
  review_acceptance_high: number | null;
  scored: number;
  evaluator_success: number | null;
  median_decision_ms: number | null;
  steps_per_hour: number | null;
}

export type SortKey = keyof Scorecard;

/** The scorecards ordered by `key` (missing figures last, whatever the direction). */
export function sorted(cards: Scorecard[], key: SortKey, descending: boolean): Scorecard[] {
  return [...cards].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
    const order = typeof x === "string" ? x.localeCompare(String(y)) : Number(x) - Number(y);
    return descending ? -order : order;
  });
}

/** A rate with its interval, "0.50 (0.09–0.91, 1 of 2)", or "—" without samples. */
export function rateText(rate: number | null, low: number | null, high: number | null, k: number, n: number): string {
  if (rate === null || low === null || high === null) return "—";
  return `${rate.toFixed(2)} (${low.toFixed(2)}–${high.toFixed(2)}, ${k} of ${n})`;
}
