/**
 * What the manager's pages say of a step nobody has decided. In a running episode the last
 * step is the open one: it awaits the annotator's decision (the model may still be proposing),
 * or in a rollout the model's valid answer. Only in an ended episode did the episode end there,
 * undecided.
 */
import { DECISION_LABEL } from "../ui/format";
import type { Episode, Step } from "../domain/api";

type Steps = Pick<Episode, "ended_at"> & Partial<Pick<Episode, "mode">> & { steps: Pick<Step, "index" | "decision">[] };

/** The index of the step awaiting the annotator's decision, or null (ended, or executing). */
export function openStepIndex(episode: Steps): number | null {
  const last = episode.steps[episode.steps.length - 1];
  if (episode.ended_at !== null || !last || last.decision) return null;
  return last.index;
}

/** The note shown in place of the final step of an undecided step. */
export function undecidedNote(episode: Steps, index: number): string {
  if (openStepIndex(episode) === index) {
    if (episode.mode === "autonomous") return "The model is answering: this is the open step.";
    return "Awaiting the annotator's decision: this is the open step.";
  }
  return episode.ended_at !== null ? "Not decided (the episode ended here)." : "Not decided.";
}

/** The badge of a step in the step list. */
export function stepBadge(episode: Steps, step: Pick<Step, "index" | "decision">): string {
  if (step.decision) return DECISION_LABEL[step.decision] ?? step.decision;
  if (openStepIndex(episode) !== step.index) return "not decided";
  return episode.mode === "autonomous" ? "model answering" : "awaiting decision";
}

/** One line on where a running episode is, for the live view. */
export function liveStatus(last: Pick<Step, "index" | "decision" | "proposals"> | null): string {
  if (last === null) return "Preparing the desktop: no observation yet.";
  if (last.decision) {
    const decided = (DECISION_LABEL[last.decision] ?? last.decision).toLowerCase();
    return `Step ${last.index} ${decided}: executing it; the next observation follows.`;
  }
  if (last.proposals.length === 0) return `Step ${last.index}: the model is proposing.`;
  return `Step ${last.index} is awaiting the annotator's decision.`;
}
