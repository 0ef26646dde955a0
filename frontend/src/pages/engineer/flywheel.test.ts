import { describe, expect, it } from "vitest";
import {
  datasetText,
  liveCell,
  offlineCell,
  rateSeries,
  rolloutCell,
  trainedOnCell,
  trainedSeries,
  type FlywheelRollouts,
  type FlywheelVersion,
} from "./flywheel";

const NO_ROLLOUTS: FlywheelRollouts = { started: 0, ended: 0, validated: 0, passed: 0, success_rate: null, scored: 0, task_success: null };
const sft = { export: 3, kind: "sft" as const, source: "interactive" as const, samples: 120, created_at: "2026-03-01T00:00:00Z" };

function version(name: string, fields: Partial<FlywheelVersion> = {}): FlywheelVersion {
  return {
    id: 1,
    name,
    parent: null,
    base_model: "ui-tars-1.5-7b",
    job: null,
    created_at: "2026-03-01T00:00:00Z",
    proposes: null,
    rollouts: NO_ROLLOUTS,
    live: null,
    offline: null,
    trained_on: [],
    other_exports: 0,
    ...fields,
  };
}

describe("the flywheel chart's series", () => {
  it("draws each rate over the versions, with a gap where a version has none", () => {
    const versions = [
      version("v1", { rollouts: { ...NO_ROLLOUTS, started: 2, validated: 2, passed: 1, success_rate: 0.5 } }),
      version("v2", {
        live: { accepted: 3, corrected: 1, error_kept: 0, without_proposal: 0, steps: 4, rate: 0.75 },
        offline: { evaluation: 9, step_success_rate: 0.6, steps: 20, invalid: 1, finished_at: null },
      }),
    ];
    expect(rateSeries(versions).map((s) => [s.name, s.values])).toEqual([
      ["Rollout success rate (V = 1)", [0.5, null]],
      ["Live acceptance rate", [null, 0.75]],
      ["Offline step success rate", [null, 0.6]],
      ["Rollouts' mean task success", [null, null]],
    ]);
  });

  it("adds up the samples each version was trained on by kind", () => {
    const dpo = { ...sft, export: 4, kind: "dpo" as const, samples: 30 };
    const versions = [version("v1"), version("v2", { job: 7, trained_on: [sft, dpo, { ...dpo, export: 5, samples: 10 }] })];
    expect(trainedSeries(versions).map((s) => [s.name, s.values])).toEqual([
      ["SFT samples trained on", [null, 120]],
      ["DPO samples trained on", [null, 40]],
    ]);
  });
});

describe("the flywheel table's cells", () => {
  it("says why a version has no rollout success rate", () => {
    expect(rolloutCell(NO_ROLLOUTS)).toBe("no rollouts of this version yet");
    expect(rolloutCell({ ...NO_ROLLOUTS, started: 3, ended: 1 })).toBe("1 of 3 rollouts ended, none validated yet");
    expect(rolloutCell({ ...NO_ROLLOUTS, started: 4, ended: 3, validated: 3, passed: 2, success_rate: 0.6667 })).toBe(
      "67%: 2 of 3 validated passed (3 of 4 rollouts ended)",
    );
  });

  it("says why a version has no live acceptance rate", () => {
    expect(liveCell(null, 365)).toBe("not used by people in the last 365 days");
    const none = { accepted: 0, corrected: 0, error_kept: 0, without_proposal: 2, steps: 0, rate: null };
    expect(liveCell(none, 365)).toBe("no step decided on a valid proposal (2 without one)");
    expect(liveCell({ ...none, accepted: 1, steps: 1, rate: 1 }, 365)).toBe("100%: 1 of 1 step accepted");
  });

  it("says when a version was not evaluated offline", () => {
    expect(offlineCell(null)).toBe("not evaluated on this project yet");
    expect(offlineCell({ evaluation: 1, step_success_rate: 0.45, steps: 20, invalid: 0, finished_at: null })).toBe(
      "45% of 20 held-out steps",
    );
  });

  it("names the exports a version was trained on, and says when it was not fine-tuned here", () => {
    expect(trainedOnCell({ job: null, trained_on: [], other_exports: 0 })).toBe("not fine-tuned here (registered as it is)");
    expect(trainedOnCell({ job: 7, trained_on: [sft], other_exports: 1 })).toBe(
      "SFT (interactive) #3: 120 samples; 1 export of other projects",
    );
    expect(trainedOnCell({ job: 7, trained_on: [], other_exports: 0 })).toBe("its exports no longer exist");
    expect(datasetText({ ...sft, samples: null, source: "rollout" })).toBe("SFT (rollout) #3: size unknown");
  });
});
