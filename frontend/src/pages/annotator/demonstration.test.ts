import { describe, expect, it } from "vitest";
import { drivingChoices, thoughtOf, thoughtsLeft } from "./demonstration";
import { EMPTY, type EpisodeView } from "./episode";
import type { Step } from "../../domain/api";

function step(index: number, extra: Partial<Step> = {}): Step {
  return {
    index,
    screenshot: "a".repeat(64),
    screen_size: [1280, 800],
    proposals: [],
    chosen_rank: null,
    decision: "demonstrated",
    final_thought: "",
    final_action: { type: "click", point: [1, 2] },
    final_action_text: null,
    decided_by: "ann",
    decided_at: null,
    decision_ms: null,
    revisions: [],
    ...extra,
  };
}

const revision = (number: number, final_thought: string, drafted_by = "") => ({
  number,
  decision: "demonstrated" as const,
  final_thought,
  final_action: { type: "click" as const, point: [1, 2] as [number, number] },
  final_action_text: null,
  author: "ann",
  note: "",
  drafted_by,
  created_at: "",
});

describe("driving choices", () => {
  const interactive: EpisodeView = { ...EMPTY, episode: 1, openStep: 3 };
  it("offers a take over while a step is open, and hand back or finish while driving", () => {
    expect(drivingChoices(interactive, "deciding")).toEqual({ takeOver: true, handBack: false, finish: false });
    expect(drivingChoices(interactive, "executing").takeOver).toBe(false);
    expect(drivingChoices(interactive, "driving")).toEqual({ takeOver: false, handBack: true, finish: true });
  });
  it("has no model to hand back to in a demonstration", () => {
    const demo = { ...interactive, demonstration: true };
    expect(drivingChoices(demo, "driving")).toEqual({ takeOver: false, handBack: false, finish: true });
    expect(drivingChoices(demo, "deciding").takeOver).toBe(false);
  });
});

describe("thoughts", () => {
  it("is the latest revision's; a draft is not approved until the person writes or approves it", () => {
    expect(thoughtOf(step(1))).toEqual({ text: "", draftedBy: "", approved: false });
    const drafted = step(2, { revisions: [revision(1, "Open the menu.", "ui-tars")] });
    expect(thoughtOf(drafted)).toEqual({ text: "Open the menu.", draftedBy: "ui-tars", approved: false });
    const approved = step(3, { revisions: [revision(2, "Open the menu."), revision(1, "x", "ui-tars")] });
    expect(thoughtOf(approved).approved).toBe(true);
    expect(thoughtsLeft([step(1), drafted, approved, step(4, { decision: "accepted" })])).toBe(2);
  });
});
