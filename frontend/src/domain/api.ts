/** The shapes of the API answers the manager, reviewer and engineer pages read. */
import type { Action, Decision, Proposal } from "./actions";
import type { Replay } from "./socket";

export type TaskStatus = "queued" | "assigned" | "in_progress" | "submitted" | "reviewed" | "rejected" | "gold";

/** What stands between a task and a desktop here (annotation.task_support on the server). */
export interface TaskSupport {
  /** Why the task cannot run here ("" when it can): it is never claimed nor assigned. */
  cannot_run: string;
  /** The URLs the task takes from the task-file cache that the cache does not hold yet. */
  files_missing: string[];
  /** The programs the task starts that its project's desktop lacks. */
  programs_missing?: string[];
  /** Its evaluator's self-check on an untouched desktop (managers and overseers only). */
  evaluator_check?: EvaluatorCheck | null;
}

export type EvaluatorCheckStatus = "pending" | "trusted" | "passes_without_work" | "cannot_evaluate" | "failed";

/** A task's evaluator run right after its setup, with no work done (annotation.projects.evaluator_checks). */
export interface EvaluatorCheck {
  status: EvaluatorCheckStatus;
  /** Passes without work or cannot evaluate, and not cleared by a manager. */
  flagged: boolean;
  score: number | null;
  reason: string;
  /** The task's setup or evaluator changed since: it is checked again at the next import or request. */
  stale: boolean;
  requested_at: string;
  checked_at: string | null;
  cleared_by: string | null;
  cleared_at: string | null;
}

export interface EvaluatorCheckRow extends EvaluatorCheck {
  task: number;
  external_id: string;
}

export interface EvaluatorChecks {
  counts: Partial<Record<EvaluatorCheckStatus, number>>;
  checks: EvaluatorCheckRow[];
}

export interface Task extends TaskSupport {
  id: number;
  project: number;
  external_id: string;
  instruction: string;
  priority: number;
  status: TaskStatus;
  assignee: string | null;
  updated_at: string;
}

export interface BoardTask extends TaskSupport {
  id: number;
  external_id: string;
  instruction: string;
  assignee: string | null;
  priority: number;
  updated_at: string;
  episode: number | null;
  /** What the task's evaluator made of that latest episode. */
  evaluation_status: EvaluationStatus;
  task_success: number | null;
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

/** The evaluator's verdicts on the episodes that ended in a period (annotation.stats). */
export interface TaskSuccessCounts {
  scored: number;
  /** Episodes whose evaluator could not run: never counted as a score. */
  failed: number;
  /** Mean task success (0–1) of the scored episodes; null when none was scored. */
  mean: number | null;
  /** The share of scored episodes that scored 1. */
  success_rate: number | null;
}

export interface Acceptance extends Series {
  versions: {
    model_version: string;
    total: AcceptanceCounts;
    points: (AcceptanceCounts & { at: string })[];
    task_success: TaskSuccessCounts & { points: (TaskSuccessCounts & { at: string })[] };
  }[];
  task_success: TaskSuccessCounts;
}

export interface Revision {
  number: number;
  decision: Decision;
  final_thought: string;
  final_action: Action;
  final_action_text: string | null;
  author: string;
  note: string;
  /** The model that drafted this thought; empty when a person wrote or approved it. */
  drafted_by?: string;
  created_at: string;
}

/** A finished demonstration replayed on a fresh desktop with the same setup. */
export interface ReplayCheck {
  status?: "pending" | "replays" | "diverges" | "failed";
  first_divergent_step?: number | null;
  reason?: string;
  steps?: { step: number; difference: number }[];
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
  no_visible_effect?: boolean;
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
  /** "autonomous": a rollout, run by the model alone. */
  mode: "interactive" | "autonomous";
  /** The rollout it runs, and that rollout's batch (autonomous episodes only). */
  rollout: number | null;
  rollout_batch: number | null;
  task: number;
  task_external_id: string;
  instruction: string;
  project: number;
  project_name: string;
  annotator: string;
  model_version: string;
  started_at: string;
  ended_at: string | null;
  outcome: string;
  end_reason: string;
  step_count: number;
  /** The evaluator's verdict: absent for an annotator reading their own episode. */
  evaluation_status?: EvaluationStatus;
  task_success?: number | null;
  /** Why it scored what it did, or why it could not be scored. */
  evaluation_reason?: string;
  /** Demonstrated from its first step (the annotator drove the desktop). */
  demonstration?: boolean;
  /** Its demonstration replayed on a fresh desktop; empty before that. */
  replay_check?: ReplayCheck;
}

/** "" when nothing is scored (no evaluator, or no work to score). */
export type EvaluationStatus = "" | "pending" | "scored" | "failed";

export interface MetricDetail {
  index: number;
  func: string;
  score: number | "skipped";
  /** What the getters returned, shortened by the server. */
  result?: unknown;
  expected?: unknown;
  error?: string;
}

/** The evaluator's details: a score with its metrics, or the error that stopped it. */
export interface Evaluation {
  score?: number;
  reason?: string;
  conjunction?: string;
  metrics?: MetricDetail[];
  postconfig_log?: string[];
  error?: string;
}

export interface Episode extends EpisodeSummary {
  task_status: TaskStatus;
  steps: Step[];
  reviews: Review[];
  evaluation?: Evaluation;
  /** What the task's setup went on after. */
  setup_log?: string[];
  /** A branch task's episode: the rollout episode and step it goes on from, and its replay. */
  branch_of?: number | null;
  branch_step?: number | null;
  replay?: Replay;
  /** A rollout's branch tasks: made from its first wrong step. */
  branches?: BranchTask[];
}

export interface BranchTask {
  id: number;
  external_id: string;
  branch_step: number;
  status: TaskStatus;
  assignee: string | null;
  cannot_run: string;
  episodes: { id: number; outcome: string; annotator: string }[];
}

export interface MembershipRow {
  id: number;
  project: number;
  username: string;
  role: string;
}

export interface ImportReport {
  rows: number;
  created: number;
  updated: number;
  unchanged: number;
  cannot_run: number;
  cannot_run_tasks: { id: string; reason: string }[];
  not_on_desktop_tasks?: { id: string; programs: string[] }[];
  not_scored_tasks?: { id: string; reason: string }[];
  suggested_template?: string | null;
  /** The file's tasks' evaluator self-checks by status as the import left them. */
  evaluator_checks?: Partial<Record<EvaluatorCheckStatus, number>>;
  /** When the import requested them (the checks API's `requested_from`). */
  evaluator_checks_from?: string | null;
}
