/**
 * Rollout batches as the pages show them: the API's shapes, what may be done to a batch in each
 * status (and why not), the figures in words, and the new-batch and validation-settings forms
 * turned into request bodies with their mistakes named by field.
 */
import { roleIn, type Me } from "../../api";

export type BatchStatus = "queued" | "running" | "paused" | "cancelled" | "succeeded";
export type RolloutStatus = "queued" | "running" | "ended" | "validated" | "cancelled";

/** The rollouts of a batch by status, and its validated ones by V (``refresh_counts``). */
export interface BatchCounts {
  total?: number;
  queued?: number;
  running?: number;
  ended?: number;
  validated?: number;
  cancelled?: number;
  passed?: number;
  failed?: number;
}

export interface RolloutBatch {
  id: number;
  project: number;
  name: string;
  model_version: string;
  version_b: string | null;
  version_b_share: number;
  /** How many tasks it runs. */
  tasks: number;
  samples_per_task: number;
  sampling: Record<string, number>;
  stop_rules: Record<string, number>;
  max_concurrent: number;
  desktop_share: number;
  status: BatchStatus;
  progress: number;
  counts: BatchCounts;
  created_by: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** Success of a group of rollouts (annotation.rollout_stats): V = 1 among the validated. */
export interface GroupFigures {
  rollouts: number;
  validated: number;
  passed: number;
  success_rate: number | null;
  task_success: number | null;
}

export interface PartCounts {
  passed?: number;
  failed?: number;
  unknown?: number;
}

export interface BatchSummary {
  pass_at_k: number | null;
  k: number;
  success: GroupFigures;
  by_task: (GroupFigures & { task: string })[];
  by_version: (GroupFigures & { model_version: string })[];
  verdicts: Record<string, PartCounts>;
  stop_reasons: Record<string, number>;
  cost: { steps: number; tokens: number; tokens_per_rollout: number | null };
}

export type BatchDetail = RolloutBatch & BatchSummary;

export interface RuleCheck {
  name: string;
  passed: boolean;
  reason: string;
}

export interface ValidationPart {
  name: string;
  /** null: not known (yet). */
  passed: boolean | null;
  reason: string;
  details: { checks?: RuleCheck[]; [key: string]: unknown };
}

export interface Validation {
  parts?: ValidationPart[];
  verdict?: boolean | null;
  routed?: "sft" | "ct" | "";
  prompt_version?: string;
  at?: string;
}

export interface Rollout {
  id: number;
  batch: number;
  task: string;
  sample: number;
  status: RolloutStatus;
  episode: number | null;
  attempt: number;
  model_version: string;
  outcome: string;
  task_success: number | null;
  stop_reason: string;
  steps: number;
  tokens: number;
  verdict: boolean | null;
  validation: Validation;
  started_at: string | null;
  ended_at: string | null;
}

export interface RunnableTask {
  external_id: string;
  instruction: string;
  max_steps: number;
}

export interface RunnableTasks {
  runnable: RunnableTask[];
  cannot_run: number;
}

export interface ValidationSettings {
  min_task_success?: number;
  human_review?: boolean;
  judge?: { base_url: string; model: string; threshold?: number; api_key_set?: boolean };
}

/** Where the rollout pages of a section live: the batch list, a batch, an episode. */
export interface RolloutPaths {
  list: (project: number) => string;
  batch: (id: number) => string;
  episode: (id: number) => string;
}

/** Whether the user may start and steer batches of the project (the server decides again). */
export function mayRunRollouts(me: Pick<Me, "is_superuser" | "memberships">, project: number): boolean {
  const role = roleIn(me, project);
  return role === "admin" || role === "manager" || role === "engineer";
}

/** A batch that still changes: its page and list are read again meanwhile. */
export function batchLive(batch: Pick<RolloutBatch, "status" | "finished_at">): boolean {
  if (batch.status === "queued" || batch.status === "running" || batch.status === "paused") return true;
  // A cancelled batch's running rollouts stop at their next step.
  return batch.status === "cancelled" && batch.finished_at === null;
}

/** A rollout whose V may still change: running, being validated, or validated before its
 * latest review (`reviewedAt`), which judges it again. The panel is read again meanwhile. */
export function rolloutLive(rollout: Pick<Rollout, "status" | "validation">, reviewedAt: string | null = null): boolean {
  if (rollout.status === "queued" || rollout.status === "running" || rollout.status === "ended") return true;
  if (rollout.status !== "validated" || reviewedAt === null) return false;
  const judged = rollout.validation.at;
  return !judged || Date.parse(judged) < Date.parse(reviewedAt);
}

/** Why each steering button is disabled in this status; null where it is enabled. */
export function steering(status: BatchStatus): { pause: string | null; resume: string | null; cancel: string | null } {
  const ended = status === "succeeded" ? "Every rollout of this batch has ended." : "This batch was cancelled.";
  switch (status) {
    case "queued":
    case "running":
      return { pause: null, resume: "The batch is not paused.", cancel: null };
    case "paused":
      return { pause: "The batch is already paused.", resume: null, cancel: null };
    default:
      return { pause: ended, resume: ended, cancel: ended };
  }
}

export const STOP_REASON_LABEL: Record<string, string> = {
  finished: "the model finished",
  call_user: "the model asked for the user",
  max_steps: "step limit reached",
  invalid_outputs: "invalid outputs in a row",
  loop: "loop (the same action repeated)",
  no_screen_change: "the screen stopped changing",
  cancelled: "the batch was cancelled",
  setup_failed: "the task's setup failed",
  env_failed: "the desktop failed",
  desktop_lost: "the desktop was lost",
};

export function stopReasonText(reason: string): string {
  if (!reason) return "—";
  return STOP_REASON_LABEL[reason] ?? reason.replace(/_/g, " ");
}

/** V as the pages write it: V=1, V=0, or why it is not known. */
export function verdictText(rollout: Pick<Rollout, "status" | "verdict">): string {
  if (rollout.verdict === true) return "V=1";
  if (rollout.verdict === false) return "V=0";
  if (rollout.status === "validated") return "not known";
  if (rollout.status === "cancelled") return "—";
  return rollout.status === "ended" ? "validating" : "—";
}

export function partVerdictText(passed: boolean | null): string {
  if (passed === true) return "passed";
  if (passed === false) return "failed";
  return "not known";
}

/** "ui-tars-a" or "ui-tars-a · B ui-tars-b takes 30%". */
export function versionsText(batch: Pick<RolloutBatch, "model_version" | "version_b" | "version_b_share">): string {
  if (!batch.version_b) return batch.model_version;
  return `${batch.model_version} · B ${batch.version_b} takes ${Math.round(batch.version_b_share * 100)}%`;
}

/** "4 tasks × 5 = 20 rollouts". */
export function sizeText(batch: Pick<RolloutBatch, "tasks" | "samples_per_task">): string {
  const total = batch.tasks * batch.samples_per_task;
  return `${batch.tasks} task${batch.tasks === 1 ? "" : "s"} × ${batch.samples_per_task} = ${total} rollout${total === 1 ? "" : "s"}`;
}

/** "12 of 20 rollouts done · 3 running · 5 queued". */
export function progressText(counts: BatchCounts): string {
  const total = counts.total ?? 0;
  const done = (counts.ended ?? 0) + (counts.validated ?? 0) + (counts.cancelled ?? 0);
  const parts = [`${done} of ${total} rollout${total === 1 ? "" : "s"} done`];
  if (counts.running) parts.push(`${counts.running} running`);
  if (counts.queued) parts.push(`${counts.queued} queued`);
  if (counts.ended) parts.push(`${counts.ended} being validated`);
  if (counts.cancelled) parts.push(`${counts.cancelled} cancelled`);
  return parts.join(" · ");
}

/** The tasks with at least one sample at V = 1, of those the batch runs. */
export function solvedTasks(summary: Pick<BatchSummary, "by_task">): { solved: number; tasks: number } {
  return { solved: summary.by_task.filter((t) => t.passed > 0).length, tasks: summary.by_task.length };
}

export const PART_ORDER = ["rules", "evaluator", "judge", "human"];

export const PART_LABEL: Record<string, string> = {
  rules: "Rule checks",
  evaluator: "Task evaluator",
  judge: "Judge model",
  human: "Human review",
};

/** The verdict counts by part, in the validation's order, with every count present. */
export function partRows(verdicts: Record<string, PartCounts>): { name: string; passed: number; failed: number; unknown: number }[] {
  const names = Object.keys(verdicts).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return names.map((name) => ({
    name,
    passed: verdicts[name].passed ?? 0,
    failed: verdicts[name].failed ?? 0,
    unknown: verdicts[name].unknown ?? 0,
  }));
}

function rank(part: string): number {
  const at = PART_ORDER.indexOf(part);
  return at === -1 ? PART_ORDER.length : at;
}

/** The parts of a rollout's validation, in the validation's order. */
export function partsOf(validation: Validation): ValidationPart[] {
  return [...(validation.parts ?? [])].sort((a, b) => rank(a.name) - rank(b.name));
}

export const CHECK_LABEL: Record<string, string> = {
  no_op_actions: "No no-op actions",
  loops: "No loops",
  invalid_outputs: "No invalid outputs",
  call_user: "Did not give up (call_user)",
  stopped_by_rule: "Not stopped by a rule",
};

// --- the new-batch form -------------------------------------------------------------------

export const MAX_SAMPLES = 16;
export const STOP_RULE_LIMIT = 500;

export interface BatchForm {
  name: string;
  versionA: string;
  versionB: string;
  /** Percent of the samples version B takes. */
  bShare: string;
  taskMode: "all" | "some";
  chosen: string[];
  samples: string;
  /** Empty: the project's own. */
  temperature: string;
  maxConcurrent: string;
  /** Percent of the pool's desktops the batch may hold. */
  desktopShare: string;
  invalidInRow: string;
  sameActionRepeats: string;
  unchangedSteps: string;
  /** Empty: the tasks' own step limit. */
  maxSteps: string;
}

export function defaultBatchForm(versionA = ""): BatchForm {
  return {
    name: "",
    versionA,
    versionB: "",
    bShare: "50",
    taskMode: "all",
    chosen: [],
    samples: "4",
    temperature: "0.7",
    maxConcurrent: "4",
    desktopShare: "50",
    invalidInRow: "3",
    sameActionRepeats: "3",
    unchangedSteps: "5",
    maxSteps: "",
  };
}

export interface BatchRequest {
  project: number;
  name: string;
  model_version: string;
  version_b?: string;
  version_b_share?: number;
  tasks?: string[];
  samples_per_task: number;
  sampling: { temperature?: number };
  stop_rules: { invalid_in_row: number; same_action_repeats: number; unchanged_steps: number; max_steps?: number };
  max_concurrent: number;
  desktop_share: number;
}

/** The body of `POST /api/rollout-batches/`, or the form's mistakes by field. */
export function batchRequest(project: number, form: BatchForm): { body: BatchRequest } | { problems: Record<string, string> } {
  const problems: Record<string, string> = {};
  const whole = (field: string, value: string, lowest: number, highest: number): number => {
    const parsed = Number(value.trim());
    if (value.trim() === "" || !Number.isInteger(parsed) || parsed < lowest || parsed > highest) {
      problems[field] = `a whole number from ${lowest} to ${highest}`;
    }
    return parsed;
  };
  const share = (field: string, value: string, lowest: number): number => {
    const parsed = Number(value.trim());
    if (value.trim() === "" || !Number.isFinite(parsed) || parsed < lowest || parsed > 100) {
      problems[field] = `a percentage from ${lowest} to 100`;
    }
    return parsed / 100;
  };
  if (!form.versionA) problems.versionA = "choose the version that runs the tasks";
  if (form.versionB && form.versionB === form.versionA) problems.versionB = "version B must differ from version A";
  if (form.taskMode === "some" && form.chosen.length === 0) problems.tasks = "choose at least one task";
  const body: BatchRequest = {
    project,
    name: form.name.trim(),
    model_version: form.versionA,
    samples_per_task: whole("samples", form.samples, 1, MAX_SAMPLES),
    sampling: {},
    stop_rules: {
      invalid_in_row: whole("invalidInRow", form.invalidInRow, 1, STOP_RULE_LIMIT),
      same_action_repeats: whole("sameActionRepeats", form.sameActionRepeats, 2, STOP_RULE_LIMIT),
      unchanged_steps: whole("unchangedSteps", form.unchangedSteps, 1, STOP_RULE_LIMIT),
    },
    max_concurrent: whole("maxConcurrent", form.maxConcurrent, 1, 64),
    desktop_share: share("desktopShare", form.desktopShare, 1),
  };
  if (form.temperature.trim() !== "") {
    const temperature = Number(form.temperature.trim());
    if (!Number.isFinite(temperature) || temperature < 0 || temperature > 2) problems.temperature = "a number from 0 to 2";
    body.sampling.temperature = temperature;
  }
  if (form.maxSteps.trim() !== "") body.stop_rules.max_steps = whole("maxSteps", form.maxSteps, 1, STOP_RULE_LIMIT);
  if (form.versionB) {
    body.version_b = form.versionB;
    body.version_b_share = share("bShare", form.bShare, 0);
  }
  if (form.taskMode === "some") body.tasks = [...form.chosen];
  return Object.keys(problems).length > 0 ? { problems } : { body };
}

/** Why the new-batch form cannot be sent yet; null when it can. */
export function cannotStartBecause(served: number, runnable: number | null, busy: boolean): string | null {
  if (busy) return "Starting the batch…";
  if (served === 0) return "No model version is served: serve one on its Model versions page first.";
  if (runnable === 0) return "The project has no task that can run here.";
  return null;
}

// --- the validation settings form ---------------------------------------------------------

export interface ValidationForm {
  judgeUrl: string;
  judgeModel: string;
  threshold: string;
  /** A new key; empty keeps the stored one. */
  apiKey: string;
  clearKey: boolean;
  minTaskSuccess: string;
  humanReview: boolean;
}

export function validationForm(settings: ValidationSettings): ValidationForm {
  return {
    judgeUrl: settings.judge?.base_url ?? "",
    judgeModel: settings.judge?.model ?? "",
    threshold: String(settings.judge?.threshold ?? 0.5),
    apiKey: "",
    clearKey: false,
    minTaskSuccess: String(settings.min_task_success ?? 1),
    humanReview: settings.human_review ?? false,
  };
}

export interface ValidationRequest {
  min_task_success: number;
  human_review: boolean;
  judge?: { base_url: string; model: string; threshold: number; api_key?: string };
}

/** The body of `PUT /api/projects/{id}/validation/`, or the form's mistakes by field. A judge
 * is asked only when both its endpoint and model are given; the stored key is kept unless a
 * new one is typed or it is removed. */
export function validationRequest(form: ValidationForm): { body: ValidationRequest } | { problems: Record<string, string> } {
  const problems: Record<string, string> = {};
  const score = (field: string, value: string): number => {
    const parsed = Number(value.trim());
    if (value.trim() === "" || !Number.isFinite(parsed) || parsed < 0 || parsed > 1) problems[field] = "a score from 0 to 1";
    return parsed;
  };
  const body: ValidationRequest = {
    min_task_success: score("minTaskSuccess", form.minTaskSuccess),
    human_review: form.humanReview,
  };
  const url = form.judgeUrl.trim();
  const model = form.judgeModel.trim();
  if (url || model) {
    if (!url) problems.judgeUrl = "the judge's endpoint, or clear the model too to ask no judge";
    else if (!/^https?:\/\/\S+$/.test(url)) problems.judgeUrl = "an http:// or https:// address";
    if (!model) problems.judgeModel = "the judge's model name, or clear the endpoint too";
    body.judge = { base_url: url, model, threshold: score("threshold", form.threshold) };
    if (form.clearKey) body.judge.api_key = "";
    else if (form.apiKey) body.judge.api_key = form.apiKey;
  }
  return Object.keys(problems).length > 0 ? { problems } : { body };
}
