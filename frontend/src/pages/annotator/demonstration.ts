/**
 * Demonstrations in the workspace, as pure functions: what the annotator may do about driving
 * the desktop now, and where each demonstrated step's thought stands.
 */
import type { Step } from "../../domain/api";
import type { EpisodeView, Phase } from "./episode";

/** What the driving controls offer in this phase. */
export interface DrivingChoices {
  takeOver: boolean;
  handBack: boolean;
  finish: boolean;
}

export function drivingChoices(view: EpisodeView, phase: Phase): DrivingChoices {
  if (phase === "driving") {
    // A demonstration has no model to hand back to.
    return { takeOver: false, handBack: !view.demonstration, finish: true };
  }
  const open = ["deciding", "thinking", "reproposing", "model_unavailable"].includes(phase);
  return { takeOver: open && !view.demonstration && view.openStep !== null, handBack: false, finish: false };
}

/** A demonstrated step's thought as it stands: its latest revision's, else its own. */
export interface ThoughtState {
  text: string;
  /** The model whose draft it is, until the annotator approves or edits it. */
  draftedBy: string;
  approved: boolean;
}

export function thoughtOf(step: Step): ThoughtState {
  const latest = [...step.revisions].sort((a, b) => b.number - a.number)[0];
  const text = latest ? latest.final_thought : step.final_thought;
  const draftedBy = latest?.drafted_by ?? "";
  return { text, draftedBy, approved: text.trim() !== "" && draftedBy === "" };
}

export function demonstratedSteps(steps: Step[]): Step[] {
  return steps.filter((s) => s.decision === "demonstrated");
}

/** How many demonstrated steps still need the annotator's thought (written or approved). */
export function thoughtsLeft(steps: Step[]): number {
  return demonstratedSteps(steps).filter((s) => !thoughtOf(s).approved).length;
}
