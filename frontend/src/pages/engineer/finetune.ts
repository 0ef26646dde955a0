/**
 * The logic of the fine-tuning and model-version pages, apart from React so it can be
 * unit-tested: the shapes the API answers with, which exports can be trained on and in which
 * order (SFT stage, then DPO stage, as in the UI-TARS recipe), the create form turned into the
 * request body, and a job's loss curve turned into chart series.
 */
import type { ChartSeries } from "../../ui/svgCharts";

export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export interface LossPoint {
  stage: number;
  kind: string;
  step: number;
  loss: number;
}

export interface JobStage {
  kind: "sft" | "dpo";
  dataset: { export_id: number; kind: string; content_hash?: string; files: { name: string; sha256: string; size: number }[] };
}

export interface FineTuneJob {
  id: number;
  name: string;
  status: JobStatus;
  progress: number;
  base_model: string;
  base_model_path: string;
  parent_version: string | null;
  stages: JobStage[];
  project_ids: number[];
  lora: Record<string, unknown>;
  hyperparameters: Record<string, unknown>;
  version_name: string;
  base_url: string;
  loss_curve: LossPoint[];
  logs: string;
  error: string;
  cancel_requested: boolean;
  artifacts_location: string;
  attempt: number;
  model_version: { id: number; name: string } | null;
  created_by: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface Evaluation {
  id: number;
  model_version: string;
  project_id: number;
  status: JobStatus;
  progress: number;
  tolerance: number;
  total: number;
  succeeded: number;
  invalid: number;
  success_rate: number | null;
  by_action: Record<string, { total: number; succeeded: number }>;
  error: string;
  created_at: string;
  finished_at: string | null;
}

export interface ModelVersion {
  id: number;
  name: string;
  served_name: string;
  base_model: string;
  base_url: string;
  coordinate_style: string;
  adapter_location: string;
  parent: string | null;
  job: number | null;
  lineage: {
    datasets?: JobStage["dataset"][];
    libraries?: Record<string, string>;
    run?: string;
    [key: string]: unknown;
  };
  serving_status: "registered" | "loading" | "serving" | "failed";
  serving_error: string;
  served_at: string | null;
  created_at: string;
  evaluations: Evaluation[];
  /** The projects whose exports it was fine-tuned on (none for a base version). */
  training_projects?: number[];
}

export interface LiveCounts {
  accepted: number;
  corrected: number;
  error_kept: number;
  without_proposal: number;
  rate: number | null;
}

/** `GET /api/projects/{id}/model-versions/`: the versions a project runs, and per version its
 * live acceptance next to its latest offline step success rate. */
export interface ProjectVersions {
  project: number;
  model_version: string | null;
  version_b: string | null;
  version_b_share: number;
  acceptance_window_days: number;
  versions: {
    model_version: string;
    live: LiveCounts | null;
    offline: { evaluation: number; step_success_rate: number | null; steps: number; invalid: number; finished_at: string } | null;
  }[];
}

export interface DatasetExport {
  id: number;
  project: number;
  kind: "sft" | "dpo" | "ct";
  format: "trl" | "llama_factory";
  status: string;
  filters: Record<string, unknown>;
  counts: Record<string, unknown>;
  content_hash?: string;
  created_at: string;
}

export interface TrainingDefaults {
  /** The endpoint already serving a base model, where its versions are likely served too. */
  base_models: { name: string; endpoint: string }[];
  defaults: { lora: Record<string, unknown>; hyperparameters: Record<string, unknown> };
}

export const LIVE_STATUSES: ReadonlySet<string> = new Set(["queued", "running"]);

/** Why an export cannot be trained on, or null when it can (the server checks it again). */
export function unusableBecause(e: DatasetExport): string | null {
  if (e.status !== "succeeded") return `it is ${e.status}`;
  if (e.format !== "trl") return "fine-tuning reads TRL (Parquet) exports";
  if (e.kind !== "sft" && e.kind !== "dpo") return "fine-tuning takes SFT and DPO datasets";
  if (!e.filters.exclude_held_out) return "it may hold the evaluation split: export it again leaving that out";
  return null;
}

/** The stages of a job over the chosen exports: SFT ones first, then DPO ones (the UI-TARS
 * recipe: DPO is referenced against the SFT adapter), each kind in the order chosen. */
export function stageOrder(chosen: DatasetExport[]): DatasetExport[] {
  return [...chosen.filter((e) => e.kind === "sft"), ...chosen.filter((e) => e.kind === "dpo")];
}

/** The create form as the user typed it: every field a string, as inputs give them. */
export interface JobForm {
  exports: DatasetExport[];
  baseModel: string;
  parentVersion: string;
  versionName: string;
  name: string;
  baseUrl: string;
  lora: { r: string; alpha: string; dropout: string; targetModules: string };
  hp: {
    learningRate: string;
    epochs: string;
    maxSteps: string;
    batchSize: string;
    gradientAccumulationSteps: string;
    beta: string;
    seed: string;
    bf16: "auto" | "on" | "off";
    gradientCheckpointing: boolean;
    uncheckpointedLayers: string;
    visionCacheGib: string;
    keepAttention: boolean;
    dpoSharedPrompt: boolean;
    maxLength: string;
  };
}

/** The form's fields filled with the server's defaults. */
export function defaultForm(defaults: TrainingDefaults["defaults"], baseModel = "", baseUrl = ""): JobForm {
  const l = defaults.lora;
  const h = defaults.hyperparameters;
  const text = (v: unknown) => (v === null || v === undefined ? "" : String(v));
  return {
    exports: [],
    baseModel,
    parentVersion: "",
    versionName: "",
    name: "",
    baseUrl,
    lora: {
      r: text(l.r),
      alpha: text(l.alpha),
      dropout: text(l.dropout),
      targetModules: Array.isArray(l.target_modules) ? l.target_modules.join(", ") : "",
    },
    hp: {
      learningRate: text(h.learning_rate),
      epochs: text(h.epochs),
      maxSteps: Number(h.max_steps) > 0 ? text(h.max_steps) : "",
      batchSize: text(h.batch_size),
      gradientAccumulationSteps: text(h.gradient_accumulation_steps),
      beta: text(h.beta),
      seed: text(h.seed),
      bf16: h.bf16 === true ? "on" : h.bf16 === false ? "off" : "auto",
      gradientCheckpointing: Boolean(h.gradient_checkpointing),
      uncheckpointedLayers: text(h.uncheckpointed_layers ?? 0),
      visionCacheGib: text(h.vision_cache_gib ?? 8),
      keepAttention: h.keep_attention !== false,
      dpoSharedPrompt: h.dpo_shared_prompt !== false,
      maxLength: text(h.max_length),
    },
  };
}

export interface JobRequest {
  exports: number[];
  base_model: string;
  parent_version?: string;
  version_name: string;
  name?: string;
  base_url?: string;
  lora: { r: number; alpha: number; dropout: number; target_modules: string[] };
  hyperparameters: {
    learning_rate: number;
    epochs: number;
    max_steps: number;
    batch_size: number;
    gradient_accumulation_steps: number;
    beta: number;
    seed: number;
    bf16: boolean | null;
    gradient_checkpointing: boolean;
    uncheckpointed_layers: number;
    vision_cache_gib: number;
    keep_attention: boolean;
    dpo_shared_prompt: boolean;
    max_length?: number;
  };
}

/** The request body for `POST /api/finetune-jobs/`, or the form's mistakes by field. */
export function jobRequest(form: JobForm): { body: JobRequest } | { problems: Record<string, string> } {
  const problems: Record<string, string> = {};
  const number = (field: string, value: string, integer: boolean): number => {
    const parsed = Number(value.trim());
    if (value.trim() === "" || !Number.isFinite(parsed) || (integer && !Number.isInteger(parsed))) {
      problems[field] = integer ? "a whole number" : "a number";
    }
    return parsed;
  };
  if (form.exports.length === 0) problems.exports = "choose at least one dataset export";
  if (!form.baseModel && !form.parentVersion) problems.baseModel = "choose a base model or a version to continue";
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(form.versionName.trim())) {
    problems.versionName = "letters, digits, dots, dashes and underscores";
  }
  const targetModules = form.lora.targetModules
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
  if (targetModules.length === 0) problems.targetModules = "at least one module";
  const maxSteps = form.hp.maxSteps.trim() === "" ? -1 : number("maxSteps", form.hp.maxSteps, true);
  const body: JobRequest = {
    exports: stageOrder(form.exports).map((e) => e.id),
    base_model: form.parentVersion ? "" : form.baseModel,
    version_name: form.versionName.trim(),
    lora: {
      r: number("r", form.lora.r, true),
      alpha: number("alpha", form.lora.alpha, true),
      dropout: number("dropout", form.lora.dropout, false),
      target_modules: targetModules,
    },
    hyperparameters: {
      learning_rate: number("learningRate", form.hp.learningRate, false),
      epochs: number("epochs", form.hp.epochs, false),
      max_steps: maxSteps,
      batch_size: number("batchSize", form.hp.batchSize, true),
      gradient_accumulation_steps: number("gradientAccumulationSteps", form.hp.gradientAccumulationSteps, true),
      beta: number("beta", form.hp.beta, false),
      seed: number("seed", form.hp.seed, true),
      bf16: form.hp.bf16 === "auto" ? null : form.hp.bf16 === "on",
      gradient_checkpointing: form.hp.gradientCheckpointing,
      uncheckpointed_layers: number("uncheckpointedLayers", form.hp.uncheckpointedLayers, true),
      vision_cache_gib: number("visionCacheGib", form.hp.visionCacheGib, false),
      keep_attention: form.hp.keepAttention,
      dpo_shared_prompt: form.hp.dpoSharedPrompt,
    },
  };
  if (form.hp.maxLength.trim()) body.hyperparameters.max_length = number("maxLength", form.hp.maxLength, true);
  if (form.parentVersion) body.parent_version = form.parentVersion;
  if (form.name.trim()) body.name = form.name.trim();
  if (form.baseUrl.trim()) body.base_url = form.baseUrl.trim();
  return Object.keys(problems).length > 0 ? { problems } : { body };
}

/** `POST /api/finetune-jobs/estimate/`: what a job would cost, before it is created. */
export interface CostEstimate {
  stages: { kind: string; rows: number; tokens_per_row: { min: number; median: number; max: number } }[];
  card: string;
  source: string;
  gpu_hours?: number;
  gpu_memory_gib?: number;
  architecture?: string;
  scaled_from?: string | null;
  reason?: string;
  max_length: number;
  text_tokens: "counted" | "estimated";
  too_long: { export: number; row: string; tokens: number }[];
}

/** The estimate as the form shows it: a line per stage, then the GPU cost or why none. */
export function costLines(e: CostEstimate): string[] {
  const lines = e.stages.map(
    (s) =>
      `${s.kind.toUpperCase()}: ${s.rows} rows, tokens per row ${s.tokens_per_row.min} / ${s.tokens_per_row.median} / ${s.tokens_per_row.max} (min / median / max)`,
  );
  if (e.gpu_hours !== undefined && e.gpu_memory_gib !== undefined) {
    const scaled = e.scaled_from ? `, scaled from ${e.scaled_from}` : "";
    lines.push(`${e.architecture ?? "base"} on ${e.card}: about ${e.gpu_memory_gib} GiB, ${e.gpu_hours} GPU hours${scaled}`);
  } else {
    lines.push(`GPU cost: ${e.reason ?? "unknown"}`);
  }
  if (e.text_tokens === "estimated") lines.push("Text tokens estimated: the base's tokenizer is not readable here.");
  for (const row of e.too_long.slice(0, 5)) lines.push(`Too long for max_length ${e.max_length}: ${row.row}, ${row.tokens} tokens`);
  return lines;
}

/** The top of a loss axis: 1, 2 or 5 times a power of ten, at or above the highest loss. */
export function lossAxisMax(values: number[]): number {
  const top = Math.max(0, ...values.filter(Number.isFinite));
  if (top <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(top));
  for (const step of [1, 2, 5, 10]) if (top <= step * power * (1 + 1e-9)) return step * power;
  return 10 * power;
}

/** A loss as an axis tick or tooltip writes it: three significant digits, no trailing zeros. */
export function lossText(value: number): string {
  return String(Number(value.toPrecision(3)));
}

export interface LossChartData {
  labels: string[];
  series: ChartSeries[];
  max: number;
}

/** A loss curve as chart series: one position per logged step, in training order, and one
 * series per stage (so SFT and DPO losses, on different scales of meaning, are told apart). */
export function lossChart(curve: LossPoint[]): LossChartData {
  const stages = [...new Set(curve.map((p) => p.stage))].sort((a, b) => a - b);
  const series = stages.map((stage) => {
    const kind = curve.find((p) => p.stage === stage)?.kind ?? "";
    return {
      name: `Stage ${stage} (${kind.toUpperCase()})`,
      values: curve.map((p) => (p.stage === stage ? p.loss : null)),
    };
  });
  return {
    labels: curve.map((p) => `${p.kind.toUpperCase()} step ${p.step}`),
    series,
    max: lossAxisMax(curve.map((p) => p.loss)),
  };
}

/** The stages of a job in words: "SFT on export 12 → DPO on export 13". */
export function stagesText(stages: JobStage[]): string {
  return stages.map((s) => `${s.kind.toUpperCase()} on export ${s.dataset.export_id}`).join(" → ");
}

/** The projects where the user may create, cancel, serve and evaluate (engineer or admin). */
export function engineerProjects(me: { is_superuser: boolean; memberships: { project: number; role: string }[] }): Set<number> | "all" {
  if (me.is_superuser) return "all";
  return new Set(me.memberships.filter((m) => m.role === "engineer").map((m) => m.project));
}

/** Whether the user may act on a job of these projects (the server decides again). */
export function mayManage(allowed: Set<number> | "all", projectIds: number[]): boolean {
  return allowed === "all" || projectIds.some((p) => allowed.has(p));
}

/** The form after choosing a base model: its endpoint replaces the endpoint the form had from
 * the previous base, never one the user typed. */
export function withBaseModel(form: JobForm, baseModel: string, bases: TrainingDefaults["base_models"]): JobForm {
  const endpointOf = (name: string) => bases.find((b) => b.name === name)?.endpoint ?? "";
  const typed = form.baseUrl !== "" && form.baseUrl !== endpointOf(form.baseModel);
  return { ...form, baseModel, baseUrl: typed ? form.baseUrl : endpointOf(baseModel) };
}

/** The project an offline evaluation of `version` starts on: the first it was trained on that
 * the user may read, else none (the project picker then offers the first readable one). */
export function evaluationProject(version: ModelVersion, readable: number[]): string {
  const trained = (version.training_projects ?? []).find((id) => readable.includes(id));
  return trained !== undefined ? String(trained) : "";
}
