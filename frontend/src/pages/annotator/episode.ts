/**
 * The workspace's picture of an episode, rebuilt from the server's `state` and kept current by
 * its events. Pure: the socket hook feeds it, the tests drive it directly.
 *
 * The server is the truth: a reconnect replaces everything with its `state`, except the text a
 * proposal streamed so far (the server does not keep partial text; the finished proposal will
 * replace it anyway).
 */
import type { Driving, EpisodeStatePayload, Evaluation, ServerEvent, StepState } from "../../domain/socket";
import type { Action, Decision, Proposal } from "../../domain/actions";

export interface StepView extends StepState {
  /** Text the model has streamed so far, per candidate, until its proposal is stored. */
  streaming: Record<number, string>;
  /** Why the model could not propose this step, when it could not. */
  modelUnavailable: string | null;
  /** When this client first saw the step's proposal (for the decision time). */
  proposedAt: number | null;
}

export interface EpisodeView {
  episode: number | null;
  task: EpisodeStatePayload["task"] | null;
  branch: EpisodeStatePayload["branch"] | null;
  steps: StepView[];
  openStep: number | null;
  ended: boolean;
  outcome: string | null;
  endReason: string | null;
  /** The task's evaluator on the ended episode (its score), when the task has one. */
  evaluation: Evaluation | null;
  desktopFailed: string | null;
  /** Set while the episode is paused (the annotator was away): a heartbeat resumes it. */
  paused: boolean;
  /** The last error the server answered with (a refused decision, a view-only socket…). */
  error: { code: string; message: string; step?: number | null } | null;
  /** Demonstrated from its first step: no model proposes. */
  demonstration: boolean;
  /** Set while the annotator drives the desktop. */
  driving: Driving | null;
  /** Set from the hand back (or finish) until the recorded input has become steps. */
  saving: boolean;
  /** Set from a finish until the episode has ended: its desktop is not streamed again. */
  finishing: boolean;
}

export const EMPTY: EpisodeView = {
  episode: null,
  task: null,
  branch: null,
  steps: [],
  openStep: null,
  ended: false,
  outcome: null,
  endReason: null,
  evaluation: null,
  desktopFailed: null,
  paused: false,
  error: null,
  demonstration: false,
  driving: null,
  saving: false,
  finishing: false,
};

const UNAVAILABLE = "model unavailable: ";

function unavailableReason(proposals: Proposal[]): string | null {
  const marker = proposals.find((p) => p.invalid_reason.startsWith(UNAVAILABLE));
  return marker ? marker.invalid_reason.slice(UNAVAILABLE.length) : null;
}

function withStep(view: EpisodeView, index: number, change: (s: StepView) => StepView): EpisodeView {
  return { ...view, steps: view.steps.map((s) => (s.step === index ? change(s) : s)) };
}

export function reduce(view: EpisodeView, message: ServerEvent, now: number = Date.now()): EpisodeView {
  switch (message.event) {
    case "state": {
      const state = message.payload;
      const previous = new Map(view.steps.map((s) => [s.step, s]));
      const steps = state.steps.map((s): StepView => {
        const before = previous.get(s.step);
        return {
          ...s,
          streaming: s.proposals.length === 0 ? (before?.streaming ?? {}) : {},
          modelUnavailable: unavailableReason(s.proposals),
          proposedAt: before?.proposedAt ?? (s.proposals.length || s.reobserved ? now : null),
        };
      });
      const broken = state.desktop?.status === "broken" ? state.desktop.broken_reason || "broken" : null;
      return {
        episode: state.episode,
        task: state.task,
        branch: state.branch ?? null,
        steps,
        openStep: state.open_step,
        ended: state.ended,
        outcome: state.outcome,
        endReason: state.ended ? (view.endReason ?? null) : null,
        evaluation: state.evaluation ?? null,
        desktopFailed: state.ended ? null : broken,
        paused: state.paused ?? false,
        error: null,
        demonstration: state.demonstration ?? false,
        driving: state.driving ?? null,
        saving: view.saving && !state.ended && !(state.driving ?? null),
        finishing: view.finishing && !state.ended,
      };
    }
    case "observation": {
      const { step, screenshot, screen } = message.payload;
      const known = view.steps.find((s) => s.step === step);
      if (known) {
        // The screen of the open step changed before the decision: the newer observation
        // replaces it, and the model proposes again for it. The step was presented already:
        // its decision time goes on counting from then. Replaced before the model's first
        // answer reached the workspace, it is presented now: the person may decide from here.
        if (known.decision || known.screenshot === screenshot) return view;
        return {
          ...withStep(view, step, (s) => ({
            ...s,
            screenshot,
            screen,
            proposals: [],
            streaming: {},
            modelUnavailable: null,
            reobserved: (s.reobserved ?? 0) + 1,
            proposedAt: s.proposedAt ?? now,
          })),
          error: null,
        };
      }
      const added: StepView = {
        step,
        screenshot,
        screen,
        proposals: [],
        decision: null,
        final_thought: "",
        final_action: null,
        reobserved: 0,
        streaming: {},
        modelUnavailable: null,
        proposedAt: null,
      };
      return { ...view, steps: [...view.steps, added], openStep: view.ended ? null : step, error: null };
    }
    case "proposal_delta": {
      const { step, candidate, text } = message.payload;
      return withStep(view, step, (s) =>
        s.proposals.length
          ? s
          : { ...s, streaming: { ...s.streaming, [candidate]: (s.streaming[candidate] ?? "") + text } },
      );
    }
    case "proposal": {
      const { step, candidates } = message.payload;
      return withStep(view, step, (s) => {
        const known = new Set(s.proposals.map((p) => p.rank));
        const proposals = [...s.proposals, ...candidates.filter((c) => !known.has(c.rank))];
        return {
          ...s,
          proposals,
          streaming: {},
          modelUnavailable: unavailableReason(proposals),
          proposedAt: s.proposedAt ?? now,
        };
      });
    }
    case "model_unavailable": {
      const { step, reason } = message.payload;
      return withStep(view, step, (s) => ({ ...s, modelUnavailable: reason, proposedAt: s.proposedAt ?? now }));
    }
    case "decided": {
      const { step, decision, action } = message.payload;
      const next = withStep(view, step, (s) => ({
        ...s,
        decision: decision as Decision,
        final_action: action as Action,
      }));
      return { ...next, openStep: view.openStep === step ? null : view.openStep, error: null };
    }
    case "ended":
      return {
        ...view,
        ended: true,
        openStep: null,
        outcome: message.payload.outcome,
        endReason: message.payload.reason,
        desktopFailed: null,
      };
    case "evaluated":
      return { ...view, evaluation: message.payload };
    case "replayed":
      return { ...view, branch: message.payload };
    case "paused":
      return { ...view, paused: true };
    case "resumed":
      return { ...view, paused: false };
    case "desktop_failed":
      return view.ended ? view : { ...view, desktopFailed: message.payload.reason || "the desktop failed" };
    case "error":
      return { ...view, error: message.payload };
    case "driving":
      return { ...view, driving: message.payload, saving: false, error: null };
    case "handed_back":
      return { ...view, driving: null, saving: true };
    case "finishing":
      return { ...view, driving: null, saving: true, finishing: true };
    case "demonstrated":
      // Its steps are written: they come with the state the socket asks for at once (./socket).
      return { ...view, saving: false };
    default:
      return view;
  }
}

/** What the annotator is waiting for, or doing, now. */
export type Phase =
  | "connecting"
  | "driving"
  | "saving"
  | "preparing"
  | "thinking"
  | "reproposing"
  | "deciding"
  | "model_unavailable"
  | "executing"
  | "desktop_failed"
  | "ended";

export function phaseOf(view: EpisodeView): Phase {
  if (view.episode === null) return "connecting";
  if (view.ended) return "ended";
  if (view.desktopFailed) return "desktop_failed";
  if (view.driving) return "driving";
  const last = view.steps[view.steps.length - 1];
  if (view.saving) return "saving";
  if (!last) return "preparing";
  if (last.decision) return "executing";
  if (last.modelUnavailable) return "model_unavailable";
  // A newer screen being proposed for keeps the person's controls: only approving waits.
  if (last.proposals.length === 0) return (last.reobserved ?? 0) > 0 ? "reproposing" : "thinking";
  return "deciding";
}

/** Whether the episode's desktop is streamed: not once it ended, failed, or is being finished
 * (between its steps being saved and its end, the server refuses a new stream). */
export function streamsDesktop(view: EpisodeView): boolean {
  return !view.ended && !view.finishing && !view.desktopFailed;
}

/** The open step, when there is one to decide. */
export function openStepOf(view: EpisodeView): StepView | null {
  if (view.openStep === null) return null;
  return view.steps.find((s) => s.step === view.openStep) ?? null;
}

/** The step before `step`, when its model action was kept as an error: `step` is a reflection. */
export function isReflection(view: EpisodeView, step: number): boolean {
  return view.steps.some((s) => s.step === step - 1 && s.decision === "error_kept");
}
