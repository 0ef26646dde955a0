import { describe, expect, it } from "vitest";
import { rateText, sorted, type Scorecard } from "./quality";

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
});
