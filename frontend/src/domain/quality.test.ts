import { describe, expect, it } from "vitest";
import { dailyRates, feedbackText, rateText, sorted, type Scorecard, type TimelineDay } from "./quality";

const card = (annotator: string, review_acceptance: number | null): Scorecard => ({
  annotator,
  episodes: 1,
  decided_steps: 1,
  demonstrated_steps: 0,
  reviewed: 1,
  accepted: 1,
  review_acceptance,
  review_acceptance_low: null,
  review_acceptance_high: null,
  scored: 0,
  evaluator_success: null,
  median_decision_ms: null,
  steps_per_hour: null,
  gold_steps: 0,
  gold_right: 0,
  gold_accuracy: null,
  gold_accuracy_low: null,
  gold_accuracy_high: null,
  compared_steps: 0,
  agreed_steps: 0,
  agreement: null,
  agreement_low: null,
  agreement_high: null,
});

describe("the quality page", () => {
  it("sorts by any figure, missing ones last both ways", () => {
    const cards = [card("bob", 0.5), card("ann", null), card("cid", 1)];
    expect(sorted(cards, "review_acceptance", true).map((c) => c.annotator)).toEqual(["cid", "bob", "ann"]);
    expect(sorted(cards, "review_acceptance", false).map((c) => c.annotator)).toEqual(["bob", "cid", "ann"]);
    expect(sorted(cards, "annotator", false).map((c) => c.annotator)).toEqual(["ann", "bob", "cid"]);
  });
  it("writes a rate with its interval and count", () => {
    expect(rateText(0.5, 0.0945, 0.9055, 1, 2)).toBe("0.50 (0.09–0.91, 1 of 2)");
    expect(rateText(null, null, null, 0, 0)).toBe("—");
  });
  it("draws each annotator's daily gold accuracy, with gaps on days without gold", () => {
    const day = (d: string, annotator: string, gold_right: number, gold_steps: number): TimelineDay => ({
      day: d, annotator, gold_right, gold_steps, compared_steps: 0, agreed_steps: 0, steps: 3,
    });
    const { days, series } = dailyRates(
      [day("2026-11-02", "bob", 1, 2), day("2026-11-01", "ann", 2, 2), day("2026-11-02", "ann", 0, 0), day("2026-11-03", "cal", 0, 0)],
      "gold_accuracy",
    );
    expect(days).toEqual(["2026-11-01", "2026-11-02"]);
    expect(series).toEqual([
      { name: "ann", values: [1, null] },
      { name: "bob", values: [null, 0.5] },
    ]);
  });
  it("writes feedback with the right answers", () => {
    const base = { episode: 4, task: "t-1", at: "2026-11-26T10:00:00Z" };
    expect(
      feedbackText({
        ...base,
        kind: "gold_miss",
        step: 2,
        why: "a wrong proposal was approved",
        right_answers: [{ type: "click", region: [10, 20, 30, 40] }, { type: "hotkey", keys: ["ctrl", "s"] }],
      }),
    ).toBe("Task t-1, step 2: a wrong proposal was approved. Right: click inside [10, 20, 30, 40]; or hotkey ctrl+s.");
    expect(feedbackText({ ...base, kind: "rejected", step: null, why: "Wrong file", right_answers: null })).toBe(
      "Task t-1: rejected — Wrong file.",
    );
  });
});
