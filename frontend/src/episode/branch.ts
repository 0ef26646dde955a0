/** What a branch task's replay of a rollout says, in words (the workspace and the episode viewer). */
import type { BranchState, Replay } from "../domain/socket";

/** A share of pixels as a percentage with two decimals ("0.02%"); a tiny non-zero share shows as
 * "<0.01%" so that it never reads as an exact match. */
export function pixelShare(share: number): string {
  if (share > 0 && share < 0.00005) return "<0.01%";
  return `${(share * 100).toFixed(2)}%`;
}

/** The largest difference measured during a replay, or null when nothing was measured. */
export function largestDifference(replay: Replay): number | null {
  const measured = replay.steps ?? [];
  return measured.length ? Math.max(...measured.map((s) => s.difference)) : null;
}

/** One sentence on the replay: what was replayed and how closely each screen matched. */
export function replaySummary(branch: BranchState): string {
  const replay = branch.replay;
  const tolerance = replay.tolerance !== undefined ? pixelShare(replay.tolerance) : "the tolerance";
  if (replay.diverged_at !== undefined) {
    const at = replay.steps?.find((s) => s.step === replay.diverged_at);
    const by = at ? ` by ${pixelShare(at.difference)} of its pixels` : "";
    return `The replay diverged at step ${replay.diverged_at}: the screen differed from the rollout's${by} (tolerance ${tolerance}), so nobody is handed this desktop.`;
  }
  const largest = largestDifference(replay);
  if (largest === null) return `The desktop is being prepared: the rollout's steps before step ${branch.step} are replayed first.`;
  const replayed =
    branch.step <= 1
      ? "Nothing was replayed (the rollout's first step was the wrong one)"
      : branch.step === 2
        ? `Step 1 of rollout episode ${branch.episode} was replayed on this desktop`
        : `Steps 1–${branch.step - 1} of rollout episode ${branch.episode} were replayed on this desktop`;
  return `${replayed}; every screen matched the rollout's within ${tolerance} of its pixels (largest difference ${pixelShare(largest)}).`;
}

/** What the annotator is told at the step handed over: whoever marked it (a reviewer or a
 * manager), it was marked wrong in review. */
export function handedOverNote(branch: BranchState): string {
  return ` The model's step ${branch.step}, proposed below as the rollout ran it, was marked wrong in review: correct it, or keep the error and reflect on it at the next step.`;
}
