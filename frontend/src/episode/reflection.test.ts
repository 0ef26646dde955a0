import { describe, expect, it } from "vitest";
import { finalDecision, reflectionNote, reflectsOn } from "./reflection";
import type { Decision } from "../domain/actions";

const step = (index: number, decision: Decision | "", revised?: Decision) => ({
  index,
  decision,
  revisions: revised ? [{ decision: revised }] : [],
});

describe("reflection steps", () => {
  const steps = [step(1, "accepted"), step(2, "error_kept"), step(3, "corrected"), step(4, "accepted")];

  it("are the steps right after a kept error", () => {
    expect(steps.map((s) => reflectsOn(steps, s))).toEqual([null, null, 2, null]);
    expect(reflectionNote(steps, steps[2])).toBe(
      "Reflection step: the annotator kept the model's wrong action at step 2 on purpose, and this step recovers from it.",
    );
    expect(reflectionNote(steps, steps[1])).toBe(
      "Error kept on purpose: the model's wrong action was executed, and step 3 reflects on it.",
    );
    expect(reflectionNote(steps, steps[0])).toBeNull();
  });

  it("include the open step after a kept error, whatever it is decided as", () => {
    const open = [step(1, "error_kept"), step(2, "")];
    expect(reflectsOn(open, open[1])).toBe(1);
  });

  it("are not kept errors themselves", () => {
    const twice = [step(1, "error_kept"), step(2, "error_kept")];
    expect(reflectsOn(twice, twice[1])).toBeNull();
    expect(reflectionNote(twice, twice[1])).toBe(
      "Error kept on purpose: the model's wrong action was executed, with no reflection step after it.",
    );
  });

  it("follow a step's latest revision", () => {
    const revised = [step(1, "accepted", "error_kept"), step(2, "corrected"), step(3, "error_kept", "corrected"), step(4, "accepted")];
    expect(finalDecision(revised[0])).toBe("error_kept");
    expect(revised.map((s) => reflectsOn(revised, s))).toEqual([null, 1, null, null]);
  });
});
