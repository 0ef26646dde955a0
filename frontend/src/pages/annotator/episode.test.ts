import { describe, expect, it } from "vitest";
import { EMPTY, isReflection, openStepOf, phaseOf, reduce, streamsDesktop } from "./episode";
import { backoff, pendingAfterState } from "./socket";
import type { EpisodeStatePayload } from "../../domain/socket";
import type { Proposal } from "../../domain/actions";

const proposal: Proposal = {
  rank: 0,
  raw_text: "Thought: open it\nAction: click(start_box='(10,20)')",
  thought: "open it",
  action: { type: "click", point: [10, 20] },
  invalid_reason: "",
  model_name: "ui-tars",
  model_version: "1.5",
  latency_ms: 900,
};

function state(overrides: Partial<EpisodeStatePayload> = {}): EpisodeStatePayload {
  return {
    episode: 7,
    task: { id: 3, instruction: "Open the folder", max_steps: 10 },
    steps: [],
    open_step: null,
    ended: false,
    outcome: null,
    desktop: { status: "leased", broken_reason: "" },
    ...overrides,
  };
}

const observed = reduce(
  reduce(EMPTY, { event: "state", payload: state() }),
  { event: "observation", payload: { step: 1, screenshot: "ab", screen: [1280, 800] } },
);

describe("the episode view", () => {
  it("shows the annotator the task's score once the evaluator has it, and after a reload", () => {
    const ended = reduce(observed, { event: "ended", payload: { outcome: "finished", reason: "" } });
    expect(ended.evaluation).toBeNull();
    const scored = reduce(ended, { event: "evaluated", payload: { status: "scored", task_success: 1 } });
    expect(scored.evaluation).toEqual({ status: "scored", task_success: 1 });
    const reloaded = reduce(EMPTY, {
      event: "state",
      payload: { ...state(), ended: true, outcome: "finished", evaluation: { status: "pending", task_success: null } },
    });
    expect(reloaded.evaluation?.status).toBe("pending");
  });

  it("keeps the controls and the decision time when a newer screen replaces the observation", () => {
    const proposed = reduce(observed, { event: "proposal", payload: { step: 1, candidates: [proposal] } }, 1000);
    const replaced = reduce(
      proposed,
      { event: "observation", payload: { step: 1, screenshot: "cd", screen: [1280, 800] } },
      61_000,
    );
    expect(phaseOf(replaced)).toBe("reproposing");
    expect(openStepOf(replaced)?.proposedAt).toBe(1000);
    const again = reduce(replaced, { event: "proposal", payload: { step: 1, candidates: [proposal] } }, 62_000);
    expect(phaseOf(again)).toBe("deciding");
    expect(openStepOf(again)?.proposedAt).toBe(1000);
  });

  it("counts the decision time from a replacement that came before the model's first answer", () => {
    const replaced = reduce(
      observed,
      { event: "observation", payload: { step: 1, screenshot: "cd", screen: [1280, 800] } },
      500,
    );
    expect(phaseOf(replaced)).toBe("reproposing");
    expect(openStepOf(replaced)?.proposedAt).toBe(500);
    const answered = reduce(replaced, { event: "proposal", payload: { step: 1, candidates: [proposal] } }, 3_000);
    expect(openStepOf(answered)?.proposedAt).toBe(500);
    const step = { step: 1, screenshot: "cd", screen: [1280, 800] as [number, number], proposals: [], decision: null, final_thought: "", final_action: null, reobserved: 1 };
    const reloaded = reduce(EMPTY, { event: "state", payload: state({ steps: [step], open_step: 1 }) }, 9_000);
    expect(openStepOf(reloaded)?.proposedAt).toBe(9_000);
  });

  it("goes from preparing to thinking to deciding to executing", () => {
    expect(phaseOf(EMPTY)).toBe("connecting");
    expect(phaseOf(reduce(EMPTY, { event: "state", payload: state() }))).toBe("preparing");
    expect(phaseOf(observed)).toBe("thinking");
    const proposed = reduce(observed, { event: "proposal", payload: { step: 1, candidates: [proposal] } });
    expect(phaseOf(proposed)).toBe("deciding");
    expect(openStepOf(proposed)?.proposals).toHaveLength(1);
    const decided = reduce(proposed, {
      event: "decided",
      payload: { step: 1, decision: "accepted", action: proposal.action! },
    });
    expect(phaseOf(decided)).toBe("executing");
    expect(openStepOf(decided)).toBeNull();
  });

  it("accumulates streamed text per candidate until the proposal replaces it", () => {
    let view = reduce(observed, { event: "proposal_delta", payload: { step: 1, candidate: 0, text: "Thought: " } });
    view = reduce(view, { event: "proposal_delta", payload: { step: 1, candidate: 0, text: "open" } });
    expect(view.steps[0].streaming[0]).toBe("Thought: open");
    view = reduce(view, { event: "proposal", payload: { step: 1, candidates: [proposal] } });
    expect(view.steps[0].streaming).toEqual({});
    // A late delta does not come back after the proposal.
    view = reduce(view, { event: "proposal_delta", payload: { step: 1, candidate: 0, text: "x" } });
    expect(view.steps[0].streaming).toEqual({});
  });

  it("keeps streamed text across a reconnect while the proposal is not stored", () => {
    const streamed = reduce(observed, { event: "proposal_delta", payload: { step: 1, candidate: 0, text: "Thought" } });
    const step = { step: 1, screenshot: "ab", screen: [1280, 800] as [number, number], proposals: [], decision: null, final_thought: "", final_action: null };
    const rebuilt = reduce(streamed, { event: "state", payload: state({ steps: [step], open_step: 1 }) });
    expect(rebuilt.steps[0].streaming[0]).toBe("Thought");
  });

  it("says when the model is unavailable, also after a reconnect", () => {
    const down = reduce(observed, { event: "model_unavailable", payload: { step: 1, reason: "timeout" } });
    expect(phaseOf(down)).toBe("model_unavailable");
    const marker = { ...proposal, action: null, thought: "", invalid_reason: "model unavailable: timeout" };
    const step = { step: 1, screenshot: "ab", screen: [1280, 800] as [number, number], proposals: [marker], decision: null, final_thought: "", final_action: null };
    const rebuilt = reduce(EMPTY, { event: "state", payload: state({ steps: [step], open_step: 1 }) });
    expect(phaseOf(rebuilt)).toBe("model_unavailable");
    expect(rebuilt.steps[0].modelUnavailable).toBe("timeout");
  });

  it("shows a failed desktop and an ended episode", () => {
    const failed = reduce(observed, { event: "desktop_failed", payload: { desktop: 2, reason: "x11vnc died" } });
    expect(phaseOf(failed)).toBe("desktop_failed");
    const ended = reduce(failed, { event: "ended", payload: { outcome: "env_failed", reason: "step 1 failed" } });
    expect(phaseOf(ended)).toBe("ended");
    expect(ended.outcome).toBe("env_failed");
  });

  it("shows a refused decision until the step moves on", () => {
    const refused = reduce(observed, {
      event: "error",
      payload: { code: "stale_decision", message: "Step 1 was already decided (accepted).", step: 1 },
    });
    expect(refused.error?.code).toBe("stale_decision");
    const moved = reduce(refused, { event: "observation", payload: { step: 2, screenshot: "cd", screen: [1280, 800] } });
    expect(moved.error).toBeNull();
  });

  it("knows a step after a kept error is a reflection", () => {
    const view = reduce(
      reduce(observed, { event: "proposal", payload: { step: 1, candidates: [proposal] } }),
      { event: "decided", payload: { step: 1, decision: "error_kept", action: proposal.action! } },
    );
    const next = reduce(view, { event: "observation", payload: { step: 2, screenshot: "cd", screen: [1280, 800] } });
    expect(isReflection(next, 2)).toBe(true);
    expect(isReflection(next, 1)).toBe(false);
  });
});

describe("a pending decision after a reconnect", () => {
  const decision = { type: "decide" as const, step: 2, decision: "accepted" as const, proposal: 0 };
  const open = { step: 2, screenshot: "x", screen: [10, 10] as [number, number], proposals: [proposal], decision: null, final_thought: "", final_action: null };

  it("is sent again while its step is open", () => {
    expect(pendingAfterState(decision, state({ steps: [open], open_step: 2 }))).toBe("resend");
  });

  it("is done when the server committed it before the drop", () => {
    const decided = { ...open, decision: "accepted" as const };
    expect(pendingAfterState(decision, state({ steps: [decided] }))).toBe("done");
  });

  it("is stale when the step was decided otherwise or the episode ended", () => {
    expect(pendingAfterState(decision, state({ steps: [{ ...open, decision: "corrected" as const }] }))).toBe("stale");
    expect(pendingAfterState(decision, state({ steps: [open], open_step: 2, ended: true }))).toBe("stale");
  });

  it("reconnects with a growing, bounded backoff", () => {
    expect(backoff(0)).toBe(500);
    expect(backoff(1)).toBeGreaterThan(backoff(0));
    expect(backoff(50)).toBe(8000);
  });
});

describe("a branch task's replay", () => {
  it("is kept from the state and replaced when the server says how the replay went", () => {
    const branch = { episode: 4, step: 2, replay: {} };
    const connected = reduce(EMPTY, { event: "state", payload: { ...state(), branch } });
    expect(connected.branch).toEqual(branch);
    const replay = { tolerance: 0.002, steps: [{ step: 1, difference: 0 }, { step: 2, difference: 0.0001 }] };
    const replayed = reduce(connected, { event: "replayed", payload: { episode: 4, step: 2, replay } });
    expect(replayed.branch?.replay.steps).toHaveLength(2);
    expect(replayed.steps).toBe(connected.steps);
  });
});

describe("driving the desktop", () => {
  const proposed = reduce(observed, { event: "proposal", payload: { step: 1, candidates: [proposal] } });
  const driving = { from_step: 1, over_proposal: 0, ended: false };

  it("is its own phase from the take over, saving after the hand back, deciding again after", () => {
    const taken = reduce(proposed, { event: "driving", payload: driving });
    expect(phaseOf(taken)).toBe("driving");
    const handed = reduce(taken, { event: "handed_back", payload: { ...driving, ended: true } });
    expect(phaseOf(handed)).toBe("saving");
    const saved = reduce(handed, { event: "demonstrated", payload: { from_step: 1, steps: 2, skipped: [] } });
    expect(saved.saving).toBe(false);
  });

  it("streams the desktop no more from a finish: its steps saved, it is about to end", () => {
    const taken = reduce(proposed, { event: "driving", payload: driving });
    expect(streamsDesktop(taken)).toBe(true);
    const finishing = reduce(taken, { event: "finishing", payload: { ...driving, ended: true } });
    const saved = reduce(finishing, { event: "demonstrated", payload: { from_step: 1, steps: 2, skipped: [] } });
    expect([saved.saving, saved.ended, streamsDesktop(saved)]).toEqual([false, false, false]);
    const stillOpen = reduce(saved, { event: "state", payload: state({ demonstration: true }) });
    expect(streamsDesktop(stillOpen)).toBe(false);
    const ended = reduce(stillOpen, { event: "state", payload: state({ demonstration: true, ended: true }) });
    expect([ended.finishing, streamsDesktop(ended)]).toEqual([false, false]);
  });

  it("comes back with a reload: the state says who drives", () => {
    const reloaded = reduce(EMPTY, { event: "state", payload: state({ demonstration: true, driving }) });
    expect(phaseOf(reloaded)).toBe("driving");
    expect(reloaded.demonstration).toBe(true);
  });
});
