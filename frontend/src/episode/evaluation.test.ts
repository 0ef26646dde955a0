import { describe, expect, it } from "vitest";
import { metricVerdict, replayCheckText, shortened, taskSuccessCell } from "./evaluation";

describe("taskSuccessCell", () => {
  it("writes a score with two decimals and its reason in the title", () => {
    expect(taskSuccessCell({ evaluation_status: "scored", task_success: 1, evaluation_reason: "every metric ran" })).toEqual({
      text: "1.00",
      title: "every metric ran",
    });
    expect(taskSuccessCell({ evaluation_status: "scored", task_success: 0, evaluation_reason: "" }).text).toBe("0.00");
    expect(taskSuccessCell({ evaluation_status: "scored", task_success: 0.5 }).text).toBe("0.50");
  });

  it("says an episode is being scored while the evaluator runs", () => {
    expect(taskSuccessCell({ evaluation_status: "pending", task_success: null }).text).toBe("scoring…");
  });

  it("says a failed evaluation is not a score, with why in the title", () => {
    const cell = taskSuccessCell({ evaluation_status: "failed", task_success: null, evaluation_reason: "the desktop was lost" });
    expect(cell).toEqual({ text: "not scored", title: "the desktop was lost" });
  });

  it("shows a dash when nothing is scored or the reader may not see it", () => {
    expect(taskSuccessCell({ evaluation_status: "", task_success: null }).text).toBe("—");
    expect(taskSuccessCell({}).text).toBe("—");
  });
});

describe("metricVerdict", () => {
  it("gives the score, a skipped metric, and the error that made it 0", () => {
    expect(metricVerdict({ index: 0, func: "compare_table", score: 1 })).toBe("1.00");
    expect(metricVerdict({ index: 1, func: "exact_match", score: "skipped" })).toBe("skipped");
    expect(metricVerdict({ index: 2, func: "compare_table", score: 0, error: "getter: FileNotFoundError: a.xlsx" })).toBe(
      "0.00 — getter: FileNotFoundError: a.xlsx",
    );
  });
});

describe("shortened", () => {
  it("keeps short values and cuts long ones with an ellipsis", () => {
    expect(shortened("abc")).toBe("abc");
    expect(shortened(["a", 1])).toBe('["a",1]');
    expect(shortened(undefined)).toBe("—");
    expect(shortened("x".repeat(10), 4)).toBe("xxxx…");
  });
});

describe("the replay check", () => {
  it("says whether a demonstration replays and where it diverged", () => {
    expect(replayCheckText(undefined)).toBe("");
    expect(replayCheckText({ status: "replays" })).toMatch(/^Replays/);
    expect(replayCheckText({ status: "diverges", first_divergent_step: 3 })).toMatch(/^Diverges at step 3/);
    expect(replayCheckText({ status: "failed", reason: "no fresh desktop was ready" })).toMatch(/no fresh desktop/);
  });
});
