/** What the episode socket says about an episode (server → workspace), and what the workspace
 * sends back. */
import type { Action, Decision, PeopleDecision, Proposal } from "./actions";

export interface StepState {
  step: number;
  screenshot: string;
  screen: [number, number];
  proposals: Proposal[];
  decision: Decision | null;
  final_thought: string;
  final_action: Action | null;
  /** How many times a newer screen replaced the step's observation before its decision. */
  reobserved?: number;
}

export interface EpisodeStatePayload {
  episode: number;
  task: { id: number; instruction: string; max_steps: number };
  steps: StepState[];
  open_step: number | null;
  ended: boolean;
  outcome: string | null;
  /** The task's evaluator on the ended episode, when the task has one. */
  evaluation?: Evaluation | null;
  desktop: { status: string; broken_reason: string } | null;
  paused?: boolean;
  /** A branch task's episode: the rollout it goes on from, the step handed over, the replay. */
  branch?: BranchState | null;
  /** Demonstrated from its first step: the annotator drives, no model proposes. */
  demonstration?: boolean;
  /** The annotator is driving the desktop now (a demonstration, or a take over). */
  driving?: Driving | null;
}

/** A stretch the annotator drives: from which step, over which proposal (its rank), if any. */
export interface Driving {
  from_step: number;
  over_proposal: number | null;
  ended: boolean;
}

/** How a branch task's desktop replayed the rollout (each step's share of differing pixels). */
export interface Replay {
  episode?: number;
  step?: number;
  tolerance?: number;
  steps?: { step: number; difference: number }[];
  diverged_at?: number;
  after_kept_error?: { step: number; difference: number; offered: boolean };
}

export interface BranchState {
  episode: number;
  step: number;
  replay: Replay;
}

/** Messages from the server: `{event, payload}`. */
export type ServerEvent =
  | { event: "state"; payload: EpisodeStatePayload }
  | {
      event: "observation";
      payload: { step: number; screenshot: string; screen: [number, number]; reobserved?: number };
    }
  | { event: "paused"; payload: { reason: string } }
  | { event: "resumed"; payload: Record<string, never> }
  | { event: "proposal_delta"; payload: { step: number; candidate: number; text: string } }
  | { event: "proposal"; payload: { step: number; candidates: Proposal[] } }
  | { event: "model_unavailable"; payload: { step: number; reason: string } }
  | { event: "decided"; payload: { step: number; decision: Decision; action: Action } }
  | { event: "decision_ack"; payload: { step: number; duplicate: boolean } }
  | { event: "ended"; payload: { outcome: string; reason: string } }
  | { event: "evaluated"; payload: Evaluation }
  | { event: "replayed"; payload: BranchState }
  | { event: "desktop_failed"; payload: { desktop: number; reason: string } }
  | { event: "heartbeat_ack"; payload: Record<string, never> }
  | { event: "driving"; payload: Driving }
  | { event: "handed_back"; payload: Driving }
  | { event: "finishing"; payload: Driving }
  | { event: "demonstrated"; payload: { from_step: number; steps: number; skipped: string[] } }
  | { event: "error"; payload: { code: string; message: string; step?: number | null; field?: string | null } };

/** The task evaluator's verdict on the episode: pending, scored (0–1) or failed (not scored). */
export interface Evaluation {
  status: "pending" | "scored" | "failed";
  task_success: number | null;
}

/** The decision message the workspace sends (client → server). */
export interface DecideMessage {
  type: "decide";
  step: number;
  decision: PeopleDecision;
  proposal?: number;
  thought?: string;
  action?: Action;
  decision_ms?: number;
  /** The observation (screenshot sha256) the annotator decided on: refused if it was replaced. */
  observation?: string;
}
