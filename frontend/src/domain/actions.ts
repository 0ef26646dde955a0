/** The records every role shows: an action, a proposal, a decision (one definition each). */

export type ActionType =
  | "click"
  | "left_double"
  | "right_single"
  | "drag"
  | "scroll"
  | "type"
  | "hotkey"
  | "wait"
  | "finished"
  | "call_user"
  | "long_press"
  | "open_app"
  | "press_home"
  | "press_back";

export type Direction = "up" | "down" | "left" | "right";

/** An action in its JSON form (vm_pool.actions.Action.to_json); points in screen pixels. */
export interface Action {
  type: ActionType;
  point?: [number, number];
  end?: [number, number];
  direction?: Direction;
  amount?: number;
  content?: string;
  keys?: string[];
  app?: string;
}

/** A model's proposal for a step: on the socket as it is made; from the API with its stored
 * text form and time as well. */
export interface Proposal {
  rank: number;
  raw_text: string;
  thought: string;
  action: Action | null;
  invalid_reason: string;
  model_name: string;
  model_version: string;
  latency_ms: number | null;
  /** The action as UI-TARS text (API only). */
  action_text?: string | null;
  created_at?: string;
}

/** A person's decision on a step. */
export type PeopleDecision = "accepted" | "corrected" | "error_kept";
/** Any step's decision: "auto" is nobody's (a rollout's model, a branch's replayed steps). */
export type Decision = PeopleDecision | "auto" | "demonstrated";
