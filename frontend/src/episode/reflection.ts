/**
 * Reflection steps of a recorded episode. An annotator who keeps the model's wrong action on
 * purpose ("error kept") lets it run, and the step after it is the reflection: the step that
 * recovers from the error (a post-reflection pair and a reflective SFT sample in the datasets,
 * unless it is itself a kept error). A step's decision is its latest revision's, as the
 * datasets read it.
 */
import type { Revision, Step } from "../domain/api";
import type { Decision } from "../domain/actions";

type Decided = Pick<Step, "index" | "decision"> & { revisions: Pick<Revision, "decision">[] };

/** The step's decision after its revisions ("" while undecided). */
export function finalDecision(step: Decided): Decision | "" {
  return step.revisions.at(-1)?.decision ?? step.decision;
}

/** The index of the kept error that `step` reflects on, or null when it is no reflection. */
export function reflectsOn(steps: Decided[], step: Decided): number | null {
  if (finalDecision(step) === "error_kept") return null;
  const before = steps.find((s) => s.index === step.index - 1);
  return before && finalDecision(before) === "error_kept" ? before.index : null;
}

/** What the viewer says of a kept error or a reflection step; null for any other step. */
export function reflectionNote(steps: Decided[], step: Decided): string | null {
  const keptAt = reflectsOn(steps, step);
  if (keptAt !== null) {
    return `Reflection step: the annotator kept the model's wrong action at step ${keptAt} on purpose, and this step recovers from it.`;
  }
  if (finalDecision(step) !== "error_kept") return null;
  const next = steps.find((s) => s.index === step.index + 1);
  if (next && reflectsOn(steps, next) !== null) {
    return `Error kept on purpose: the model's wrong action was executed, and step ${next.index} reflects on it.`;
  }
  return "Error kept on purpose: the model's wrong action was executed, with no reflection step after it.";
}
