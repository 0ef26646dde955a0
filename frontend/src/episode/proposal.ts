/** Which of a step's proposals the episode viewer sets against the final step. */
import type { Step } from "../domain/api";
import type { Proposal } from "../domain/actions";

/** The proposal the annotator picked (accepted or kept as an error), else the best-ranked
 * valid one (what a correction replaced), else whatever the model answered. */
export function proposalOf(step: Pick<Step, "chosen_rank" | "proposals">): Proposal | null {
  if (step.chosen_rank !== null) {
    const chosen = step.proposals.find((p) => p.rank === step.chosen_rank);
    if (chosen) return chosen;
  }
  const valid = step.proposals.filter((p) => !p.invalid_reason).sort((a, b) => a.rank - b.rank);
  return valid[0] ?? step.proposals[0] ?? null;
}
