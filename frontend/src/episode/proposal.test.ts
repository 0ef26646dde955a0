import { describe, expect, it } from "vitest";
import { proposalOf } from "./proposal";
import type { Proposal } from "../domain/actions";

function proposal(rank: number, invalid_reason = ""): Proposal {
  return {
    rank,
    raw_text: "",
    thought: "",
    action: invalid_reason ? null : { type: "click", point: [rank, rank] },
    action_text: null,
    invalid_reason,
    model_name: "m",
    model_version: "v",
    latency_ms: null,
    created_at: "",
  };
}

describe("proposalOf", () => {
  it("shows the proposal the annotator picked", () => {
    expect(proposalOf({ chosen_rank: 1, proposals: [proposal(0), proposal(1)] })?.rank).toBe(1);
  });

  it("shows the best-ranked valid proposal of a corrected step", () => {
    const step = { chosen_rank: null, proposals: [proposal(1), proposal(0, "unparseable"), proposal(2)] };
    expect(proposalOf(step)?.rank).toBe(1);
  });

  it("shows an invalid answer when there is nothing else, and nothing without answers", () => {
    expect(proposalOf({ chosen_rank: null, proposals: [proposal(0, "model unavailable")] })?.rank).toBe(0);
    expect(proposalOf({ chosen_rank: null, proposals: [] })).toBeNull();
  });
});
