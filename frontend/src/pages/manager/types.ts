/** The shapes of the API answers the manager, reviewer and engineer pages read. */

export type TaskStatus = "queued" | "assigned" | "in_progress" | "submitted" | "reviewed" | "rejected";
export type Decision = "accepted" | "corrected" | "error_kept";

export interface Task {
  id: number;
  project: number;
  external_id: string;
  instruction: string;
  priority: number;
  status: TaskStatus;
  assignee: string | null;
  updated_at: string;
}

export interface BoardTask {
  id: number;
  external_id: string;
  instruction: string;
  assignee: string | null;
  priority: number;
  updated_at: string;
  episode: number | null;
}

export interface Board {
  project: number;
  total: number;
  columns: { status: TaskStatus; count: number; tasks: BoardTask[] }[];
}

interface Series {
  project: number;
  bucket: "hour" | "day";
  since: string;
  until: string;
  buckets: string[];
}

export interface ThroughputPoint {
  at: string;
  steps: number;
  episodes: number;
  mean_decision_ms: number | null;
}

export interface Throughput extends Series {
  annotators: { annotator: string; steps: number; episodes: number; points: ThroughputPoint[] }[];
}

export interface AcceptanceCounts {
  accepted: number;
  corrected: number;
  error_kept: number;
  without_proposal: number;
  rate: number | null;
}

export interface Acceptance extends Series {
  versions: {
    model_version: string;
    total: AcceptanceCounts;
    points: (AcceptanceCounts & { at: string })[];
  }[];
}

export interface Action {
  type: string;
  point?: [number, number];
  end?: [number, number];
  [key: string]: unknown;
}

export interface Proposal {
  rank: number;
  raw_text: string;
  thought: string;
  action: Action | null;
  action_text: string | null;
  invalid_reason: string;
  model_name: string;
  model_version: string;
  latency_ms: number | null;
  created_at: string;
}

export interface Revision {
  number: number;
  decision: Decision;
  final_thought: string;
  final_action: Action;
  final_action_text: string | null;
  author: string;
  note: string;
  created_at: string;
}

export interface Step {
  index: number;
  screenshot: string;
  screen_size: [number, number];
  proposals: Proposal[];
  chosen_rank: number | null;
  decision: Decision | "";
  final_thought: string;
  final_action: Action | null;
  final_action_text: string | null;
  decided_by: string | null;
  decided_at: string | null;
  decision_ms: number | null;
  revisions: Revision[];
}

export interface Review {
  id: number;
  episode: number;
  reviewer: string;
  verdict: "accepted" | "rejected";
  first_wrong_step: number | null;
  comment: string;
  created_at: string;
}

export interface EpisodeSummary {
  id: number;
  task: number;
  project: number;
  annotator: string;
  model_version: string;
  started_at: string;
  ended_at: string | null;
  outcome: string;
  end_reason: string;
  step_count: number;
  instruction?: string;
  project_name?: string;
}

export interface Episode extends EpisodeSummary {
  instruction: string;
  task_external_id: string;
  task_status: TaskStatus;
  steps: Step[];
  reviews: Review[];
}

export interface MembershipRow {
  id: number;
  project: number;
  username: string;
  role: string;
}

export interface ImportReport {
  [key: string]: unknown;
}
