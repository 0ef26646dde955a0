import { describe, expect, it } from "vitest";
import { liveStatus, openStepIndex, stepBadge, undecidedNote } from "./liveStep";
import type { Proposal } from "../domain/actions";

const decided = { index: 1, decision: "accepted" as const };
const undecided = { index: 2, decision: "" as const };
const running = { ended_at: null, steps: [decided, undecided] };
const ended = { ended_at: "2026-01-01T10:00:00Z", steps: [decided, undecided] };

const proposal: Proposal = {
  rank: 0,
  raw_text: "",
  thought: "",
  action: { type: "wait" },
  action_text: "wait()",
  invalid_reason: "",
  model_name: "m",
  model_version: "v",
  latency_ms: null,
  created_at: "",
};

describe("an undecided step", () => {
  it("of a running episode is the open step awaiting the annotator's decision", () => {
    expect(openStepIndex(running)).toBe(2);
    expect(undecidedNote(running, 2)).toBe("Awaiting the annotator's decision: this is the open step.");
    expect(undecidedNote(running, 2)).not.toMatch(/ended/);
    expect(stepBadge(running, undecided)).toBe("awaiting decision");
  });

  it("of an ended episode is where the episode ended", () => {
    expect(openStepIndex(ended)).toBeNull();
    expect(undecidedNote(ended, 2)).toBe("Not decided (the episode ended here).");
    expect(stepBadge(ended, undecided)).toBe("not decided");
  });

  it("of a running rollout awaits the model, not an annotator", () => {
    const rollout = { ...running, mode: "autonomous" as const };
    expect(undecidedNote(rollout, 2)).toBe("The model is answering: this is the open step.");
    expect(stepBadge(rollout, undecided)).toBe("model answering");
    expect(stepBadge({ ...ended, mode: "autonomous" as const }, undecided)).toBe("not decided");
    expect(stepBadge(rollout, { index: 1, decision: "auto" })).toBe("Run as proposed");
  });

  it("leaves decided steps and a running episode's executing step alone", () => {
    expect(stepBadge(running, decided)).toBe("Accepted");
    expect(openStepIndex({ ended_at: null, steps: [decided] })).toBeNull();
    expect(openStepIndex({ ended_at: null, steps: [] })).toBeNull();
  });
});

describe("the live view's status line", () => {
  it("follows the open step", () => {
    expect(liveStatus(null)).toMatch(/Preparing/);
    expect(liveStatus({ index: 3, decision: "", proposals: [] })).toBe("Step 3: the model is proposing.");
    expect(liveStatus({ index: 3, decision: "", proposals: [proposal] })).toBe(
      "Step 3 is awaiting the annotator's decision.",
    );
    expect(liveStatus({ index: 3, decision: "corrected", proposals: [proposal] })).toBe(
      "Step 3 corrected: executing it; the next observation follows.",
    );
  });
});
