import { describe, expect, it } from "vitest";
import { filtersText } from "./exportFilters";

describe("filtersText", () => {
  it("writes the filters an export was asked with as words", () => {
    const stored = {
      annotator: null,
      date_to: null,
      date_from: null,
      model_version: null,
      review_status: "any",
      include_accepted: false,
      exclude_held_out: true,
      min_task_success: 1,
    };
    expect(filtersText(stored)).toBe("min task success 1 · held-out excluded");
  });

  it("names every narrowing filter in the form's order", () => {
    const stored = {
      exclude_held_out: false,
      include_accepted: true,
      annotator: "ann",
      review_status: "accepted",
      model_version: "ui-tars-1.5-7b",
      date_to: "2026-02-01T00:00:00+00:00",
      date_from: "2026-01-01T00:00:00+00:00",
    };
    expect(filtersText(stored)).toBe(
      "from 2026-01-01 · before 2026-02-01 · model version ui-tars-1.5-7b · review: accepted · annotator ann · accepted steps included · held-out included",
    );
  });

  it("names the annotator-quality thresholds", () => {
    expect(filtersText({ min_agreement: 0.7, min_gold_accuracy: 0.8, exclude_held_out: true })).toBe(
      "annotators' gold accuracy ≥ 0.8 · annotators' agreement ≥ 0.7 · held-out excluded",
    );
  });

  it("keeps a time of day and its zone", () => {
    expect(filtersText({ date_from: "2026-01-01T09:30:00Z" })).toBe("from 2026-01-01 09:30 UTC");
    expect(filtersText({ date_from: "2026-01-01T09:30:00+02:00" })).toBe("from 2026-01-01 09:30 +02:00");
  });

  it("says 'not reviewed' for the unreviewed episodes", () => {
    expect(filtersText({ review_status: "unreviewed" })).toBe("not reviewed");
  });

  it("shows a filter it does not know by its name, after the known ones", () => {
    expect(filtersText({ outcome: "finished", exclude_held_out: true, min_task_success: 1 })).toBe(
      "min task success 1 · held-out excluded · outcome: finished",
    );
    expect(filtersText({ verified: true, kinds: ["click"] })).toBe('verified: yes · kinds: ["click"]');
  });

  it("says 'all episodes' when nothing narrows the export", () => {
    expect(filtersText({})).toBe("all episodes");
    expect(filtersText({ review_status: "any", include_accepted: false })).toBe("all episodes");
  });
});
