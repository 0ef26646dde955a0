/** Annotator scorecards as the quality page shows them: their figures, their order, the
 * agreement of each pair of annotators and the daily series of the chart. */

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
  gold_steps: number;
  gold_right: number;
  gold_accuracy: number | null;
  gold_accuracy_low: number | null;
  gold_accuracy_high: number | null;
  compared_steps: number;
  agreed_steps: number;
  agreement: number | null;
  agreement_low: number | null;
  agreement_high: number | null;
}

export interface PairAgreement {
  annotators: [string, string];
  compared_steps: number;
  agreed_steps: number;
  agreement: number;
}

export interface TimelineDay {
  day: string; // YYYY-MM-DD, UTC
  annotator: string;
  gold_steps: number;
  gold_right: number;
  compared_steps: number;
  agreed_steps: number;
  steps: number;
}

export interface TaskAgreement {
  task: number;
  external_id: string;
  compared_steps: number;
  agreed_steps: number;
  agreement: number;
}

export interface QualityReport {
  scorecards: Scorecard[];
  pairs: PairAgreement[];
  tasks: TaskAgreement[];
  timeline: TimelineDay[];
}

/** The chart's days and one series per annotator of a daily rate: gold accuracy (right over
 * scored gold steps) or agreement (agreed over compared steps); null on a day without any. */
export function dailyRates(
  timeline: TimelineDay[],
  rate: "gold_accuracy" | "agreement",
): { days: string[]; series: { name: string; values: (number | null)[] }[] } {
  const [k, n] = rate === "gold_accuracy" ? (["gold_right", "gold_steps"] as const) : (["agreed_steps", "compared_steps"] as const);
  const days = [...new Set(timeline.filter((d) => d[n] > 0).map((d) => d.day))].sort();
  const names = [...new Set(timeline.filter((d) => d[n] > 0).map((d) => d.annotator))].sort();
  const series = names.map((name) => ({
    name,
    values: days.map((day) => {
      const entry = timeline.find((d) => d.day === day && d.annotator === name);
      return entry && entry[n] > 0 ? entry[k] / entry[n] : null;
    }),
  }));
  return { days, series };
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

/** What an annotator was told about their work: a gold miss with the right answers, or a
 * reviewer's rejection with its reason (annotation/quality/feedback.py). */
export interface Feedback {
  kind: "gold_miss" | "rejected";
  episode: number;
  task: string;
  step: number | null;
  why: string;
  right_answers: GoldAnswer[] | null;
  at: string;
}

/** One line of feedback, the right answers written out. */
export function feedbackText(f: Feedback): string {
  const where = `Task ${f.task}${f.step === null ? "" : `, step ${f.step}`}`;
  if (f.kind === "rejected") return `${where}: rejected — ${f.why}.`;
  const answers = (f.right_answers ?? []).map(answerText).join("; or ");
  return `${where}: ${f.why}. Right: ${answers}.`;
}

export type Box = [number, number, number, number];

/** One right answer of a gold step (annotation/quality/rules.py). */
export interface GoldAnswer {
  type: string;
  region?: Box;
  point?: [number, number];
  radius?: number;
  text?: string;
  normalise?: string;
  keys?: string[];
  direction?: string;
}

/** A gold answer in words. */
export function answerText(answer: GoldAnswer): string {
  const parts = [answer.type];
  if (answer.region) parts.push(`inside [${answer.region.join(", ")}]`);
  if (answer.point) parts.push(`within ${answer.radius ?? 20} px of (${answer.point.join(", ")})`);
  if (answer.text !== undefined) parts.push(`"${answer.text}"`);
  if (answer.keys) parts.push(answer.keys.join("+"));
  if (answer.direction) parts.push(answer.direction);
  return parts.join(" ");
}
