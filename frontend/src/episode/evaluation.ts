/** How the pages write what a task's evaluator made of an episode (annotation.evaluations). */
import type { EpisodeSummary, MetricDetail, ReplayCheck } from "../domain/api";

export interface SuccessCell {
  text: string;
  /** The reason, for the tooltip ("" when there is none). */
  title: string;
}

/** A score from 0 to 1 with two decimals, as the evaluator's metrics give it. */
export function score(value: number | null | undefined): string {
  return value === null || value === undefined ? "—" : value.toFixed(2);
}

/** The task-success cell of an episode: its score, "scoring…", "not scored" or "—". */
export function taskSuccessCell(
  episode: Pick<EpisodeSummary, "evaluation_status" | "task_success" | "evaluation_reason">,
): SuccessCell {
  const title = episode.evaluation_reason ?? "";
  switch (episode.evaluation_status) {
    case "scored":
      return { text: score(episode.task_success), title };
    case "pending":
      return { text: "scoring…", title: "The task's evaluator is scoring this episode." };
    case "failed":
      return { text: "not scored", title: title || "The evaluator could not run." };
    default:
      return { text: "—", title: "" };
  }
}

/** One metric's verdict: its score, "skipped" (the conjunction was decided before it), and
 * the error that made it 0 if there was one. */
export function metricVerdict(metric: MetricDetail): string {
  if (metric.score === "skipped") return "skipped";
  return metric.error ? `${score(metric.score)} — ${metric.error}` : score(metric.score);
}

/** A getter's value as text, cut to `max` characters (the server already keeps 300). */
export function shortened(value: unknown, max = 160): string {
  if (value === undefined) return "—";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** What the replay check of a demonstration found, in a sentence ("" when there is none). */
export function replayCheckText(check: ReplayCheck | undefined): string {
  switch (check?.status) {
    case "pending":
      return "Replaying the demonstration on a fresh desktop…";
    case "replays":
      return "Replays: run again on a fresh desktop with the same setup, every step reached the screen it was demonstrated on.";
    case "diverges":
      return `Diverges at step ${check.first_divergent_step}: replayed on a fresh desktop, its screen differed from the one demonstrated.`;
    case "failed":
      return `The replay check could not run: ${check.reason ?? "no reason given"}.`;
    default:
      return "";
  }
}
