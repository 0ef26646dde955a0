import { describe, expect, it } from "vitest";
import { handedOverNote, pixelShare, replaySummary } from "./branch";
import { decisionLabel } from "../pages/annotator/Trajectory";

describe("pixelShare", () => {
  it("writes shares as percentages and never rounds a difference to an exact match", () => {
    expect(pixelShare(0)).toBe("0.00%");
    expect(pixelShare(0.002)).toBe("0.20%");
    expect(pixelShare(0.00001)).toBe("<0.01%");
  });
});

describe("replaySummary", () => {
  const steps = [
    { step: 1, difference: 0 },
    { step: 2, difference: 0.0004 },
    { step: 3, difference: 0.0001 },
  ];
  it("names the replayed steps and the largest difference", () => {
    const text = replaySummary({ episode: 7, step: 3, replay: { tolerance: 0.002, steps } });
    expect(text).toBe(
      "Steps 1–2 of rollout episode 7 were replayed on this desktop; every screen matched the rollout's within 0.20% of its pixels (largest difference 0.04%).",
    );
  });
  it("says when nothing was replayed, and when the desktop is still being prepared", () => {
    expect(replaySummary({ episode: 7, step: 1, replay: { tolerance: 0.002, steps: [steps[0]] } })).toMatch(/^Nothing was replayed/);
    expect(replaySummary({ episode: 7, step: 2, replay: {} })).toMatch(/being prepared/);
  });
  it("says where a replay diverged and by how much", () => {
    const text = replaySummary({
      episode: 7,
      step: 3,
      replay: { tolerance: 0.002, steps: [{ step: 1, difference: 0.31 }], diverged_at: 1 },
    });
    expect(text).toContain("diverged at step 1");
    expect(text).toContain("31.00% of its pixels (tolerance 0.20%)");
  });
});

describe("handedOverNote", () => {
  it("says the step was marked wrong in review, not by whom it guesses", () => {
    const note = handedOverNote({ episode: 7, step: 3, replay: {} });
    expect(note).toContain("step 3");
    expect(note).toContain("marked wrong in review");
    expect(note).not.toContain("a reviewer");
  });
});

describe("decisionLabel", () => {
  it("names a branch task's replayed steps instead of leaving their badge empty", () => {
    expect(decisionLabel("auto")).toBe("replayed");
    expect(decisionLabel("error_kept")).toBe("error kept");
  });
});
