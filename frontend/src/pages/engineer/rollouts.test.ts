import { describe, expect, it } from "vitest";
import {
  batchLive,
  batchRequest,
  cannotStartBecause,
  defaultBatchForm,
  mayRunRollouts,
  partRows,
  partsOf,
  progressText,
  rolloutLive,
  sizeText,
  solvedTasks,
  steering,
  stopReasonText,
  validationForm,
  validationRequest,
  verdictText,
  versionsText,
} from "./rollouts";

const me = (role: string, project = 7) => ({ is_superuser: false, memberships: [{ project, project_name: "p", role: role as "manager" }] });

describe("who may run rollouts", () => {
  it("is the project's managers and engineers, and admins", () => {
    expect(mayRunRollouts(me("manager"), 7)).toBe(true);
    expect(mayRunRollouts(me("engineer"), 7)).toBe(true);
    expect(mayRunRollouts(me("reviewer"), 7)).toBe(false);
    expect(mayRunRollouts(me("annotator"), 7)).toBe(false);
    expect(mayRunRollouts(me("manager", 8), 7)).toBe(false);
    expect(mayRunRollouts({ is_superuser: true, memberships: [] }, 7)).toBe(true);
  });
});

describe("steering a batch", () => {
  it("pauses a queued or running batch, resumes a paused one, cancels until it has ended", () => {
    expect(steering("running")).toEqual({ pause: null, resume: "The batch is not paused.", cancel: null });
    expect(steering("queued").pause).toBeNull();
    expect(steering("paused")).toEqual({ pause: "The batch is already paused.", resume: null, cancel: null });
  });

  it("says why nothing can be done to an ended batch", () => {
    const done = steering("succeeded");
    expect(done.pause).toBe("Every rollout of this batch has ended.");
    expect(done.resume).toBe(done.pause);
    expect(done.cancel).toBe(done.pause);
    expect(steering("cancelled").cancel).toBe("This batch was cancelled.");
  });

  it("keeps reading a batch until it and its running rollouts have ended", () => {
    expect(batchLive({ status: "paused", finished_at: null })).toBe(true);
    expect(batchLive({ status: "cancelled", finished_at: null })).toBe(true);
    expect(batchLive({ status: "cancelled", finished_at: "2026-01-01T00:00:00Z" })).toBe(false);
    expect(batchLive({ status: "succeeded", finished_at: "2026-01-01T00:00:00Z" })).toBe(false);
  });
});

describe("a rollout's panel", () => {
  it("is read again while the rollout runs or is validated, and after a later review", () => {
    expect(rolloutLive({ status: "running", validation: {} })).toBe(true);
    expect(rolloutLive({ status: "ended", validation: {} })).toBe(true);
    const judged = { status: "validated" as const, validation: { at: "2026-01-01T10:00:00Z" } };
    expect(rolloutLive(judged)).toBe(false);
    expect(rolloutLive(judged, "2026-01-01T09:00:00Z")).toBe(false);
    expect(rolloutLive(judged, "2026-01-01T11:00:00Z")).toBe(true);
    expect(rolloutLive({ status: "cancelled", validation: {} }, "2026-01-01T11:00:00Z")).toBe(false);
  });

  it("writes V and the parts in the validation's order", () => {
    expect(verdictText({ status: "validated", verdict: true })).toBe("V=1");
    expect(verdictText({ status: "validated", verdict: false })).toBe("V=0");
    expect(verdictText({ status: "validated", verdict: null })).toBe("not known");
    expect(verdictText({ status: "ended", verdict: null })).toBe("validating");
    expect(verdictText({ status: "queued", verdict: null })).toBe("—");
    const parts = partsOf({
      parts: [
        { name: "human", passed: null, reason: "waiting for a review", details: {} },
        { name: "judge", passed: true, reason: "score 0.9", details: {} },
        { name: "rules", passed: false, reason: "a loop", details: {} },
      ],
    });
    expect(parts.map((p) => p.name)).toEqual(["rules", "judge", "human"]);
  });

  it("names stop reasons in words", () => {
    expect(stopReasonText("loop")).toBe("loop (the same action repeated)");
    expect(stopReasonText("invalid_outputs")).toBe("invalid outputs in a row");
    expect(stopReasonText("something_new")).toBe("something new");
    expect(stopReasonText("")).toBe("—");
  });
});

describe("a batch's figures in words", () => {
  it("writes versions, size and progress", () => {
    expect(versionsText({ model_version: "a", version_b: null, version_b_share: 0 })).toBe("a");
    expect(versionsText({ model_version: "a", version_b: "b", version_b_share: 0.3 })).toBe("a · B b takes 30%");
    expect(sizeText({ tasks: 4, samples_per_task: 5 })).toBe("4 tasks × 5 = 20 rollouts");
    expect(sizeText({ tasks: 1, samples_per_task: 1 })).toBe("1 task × 1 = 1 rollout");
    expect(progressText({ total: 20, validated: 10, ended: 1, cancelled: 1, running: 3, queued: 5 })).toBe(
      "12 of 20 rollouts done · 3 running · 5 queued · 1 being validated · 1 cancelled",
    );
    expect(progressText({})).toBe("0 of 0 rollouts done");
  });

  it("counts solved tasks and lists every part's counts, rules first", () => {
    const group = { rollouts: 2, validated: 2, success_rate: null, task_success: null };
    expect(solvedTasks({ by_task: [{ ...group, task: "a", passed: 1 }, { ...group, task: "b", passed: 0 }] })).toEqual({ solved: 1, tasks: 2 });
    expect(partRows({ judge: { passed: 2 }, rules: { failed: 1, passed: 1 }, custom: { unknown: 1 } })).toEqual([
      { name: "rules", passed: 1, failed: 1, unknown: 0 },
      { name: "judge", passed: 2, failed: 0, unknown: 0 },
      { name: "custom", passed: 0, failed: 0, unknown: 1 },
    ]);
  });
});

describe("the new-batch form", () => {
  it("asks for all runnable tasks with the default stop rules", () => {
    const result = batchRequest(7, defaultBatchForm("ui-tars-a"));
    expect(result).toEqual({
      body: {
        project: 7,
        name: "",
        model_version: "ui-tars-a",
        samples_per_task: 4,
        sampling: { temperature: 0.7 },
        stop_rules: { invalid_in_row: 3, same_action_repeats: 3, unchanged_steps: 5 },
        max_concurrent: 4,
        desktop_share: 0.5,
      },
    });
  });

  it("sends chosen tasks, version B's share and the step limit as fractions and numbers", () => {
    const form = {
      ...defaultBatchForm("a"),
      versionB: "b",
      bShare: "25",
      taskMode: "some" as const,
      chosen: ["t1", "t2"],
      temperature: "",
      maxSteps: "15",
      desktopShare: "30",
    };
    const result = batchRequest(7, form);
    expect("body" in result && result.body).toMatchObject({
      version_b: "b",
      version_b_share: 0.25,
      tasks: ["t1", "t2"],
      sampling: {},
      stop_rules: { max_steps: 15 },
      desktop_share: 0.3,
    });
  });

  it("names every mistake by its field", () => {
    const form = {
      ...defaultBatchForm(""),
      versionB: "",
      taskMode: "some" as const,
      samples: "17",
      temperature: "hot",
      sameActionRepeats: "1",
      invalidInRow: "1.5",
      desktopShare: "0",
      maxConcurrent: "",
    };
    const result = batchRequest(7, form);
    expect("problems" in result && result.problems).toEqual({
      versionA: "choose the version that runs the tasks",
      tasks: "choose at least one task",
      samples: "a whole number from 1 to 16",
      temperature: "a number from 0 to 2",
      sameActionRepeats: "a whole number from 2 to 500",
      invalidInRow: "a whole number from 1 to 500",
      desktopShare: "a percentage from 1 to 100",
      maxConcurrent: "a whole number from 1 to 64",
    });
    const same = batchRequest(7, { ...defaultBatchForm("a"), versionB: "a" });
    expect("problems" in same && same.problems.versionB).toBe("version B must differ from version A");
  });

  it("says why it cannot be sent", () => {
    expect(cannotStartBecause(0, 3, false)).toMatch(/No model version is served/);
    expect(cannotStartBecause(1, 0, false)).toBe("The project has no task that can run here.");
    expect(cannotStartBecause(1, 3, true)).toBe("Starting the batch…");
    expect(cannotStartBecause(1, null, false)).toBeNull();
  });
});

describe("the validation settings form", () => {
  it("starts from the stored settings, the key never shown", () => {
    const form = validationForm({ min_task_success: 0.5, human_review: true, judge: { base_url: "http://j/v1", model: "m", threshold: 0.7, api_key_set: true } });
    expect(form).toEqual({
      judgeUrl: "http://j/v1",
      judgeModel: "m",
      threshold: "0.7",
      apiKey: "",
      clearKey: false,
      minTaskSuccess: "0.5",
      humanReview: true,
    });
    expect(validationForm({})).toMatchObject({ judgeUrl: "", threshold: "0.5", minTaskSuccess: "1", humanReview: false });
  });

  it("keeps the stored key unless a new one is typed or it is removed", () => {
    const form = validationForm({ judge: { base_url: "http://j/v1", model: "m", api_key_set: true } });
    expect(validationRequest(form)).toEqual({
      body: { min_task_success: 1, human_review: false, judge: { base_url: "http://j/v1", model: "m", threshold: 0.5 } },
    });
    const typed = validationRequest({ ...form, apiKey: "sk-new" });
    expect("body" in typed && typed.body.judge?.api_key).toBe("sk-new");
    const cleared = validationRequest({ ...form, clearKey: true });
    expect("body" in cleared && cleared.body.judge?.api_key).toBe("");
  });

  it("asks no judge when both its fields are empty, and names a half-given one", () => {
    expect(validationRequest(validationForm({}))).toEqual({ body: { min_task_success: 1, human_review: false } });
    const half = validationRequest({ ...validationForm({}), judgeModel: "m", minTaskSuccess: "2" });
    expect("problems" in half && half.problems).toEqual({
      judgeUrl: "the judge's endpoint, or clear the model too to ask no judge",
      minTaskSuccess: "a score from 0 to 1",
    });
    const bad = validationRequest({ ...validationForm({}), judgeUrl: "judge:8000", judgeModel: "m", threshold: "x" });
    expect("problems" in bad && bad.problems).toEqual({ judgeUrl: "an http:// or https:// address", threshold: "a score from 0 to 1" });
  });
});
