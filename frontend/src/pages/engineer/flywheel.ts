/**
 * The flywheel chart's logic, apart from React so it can be unit-tested: the shape of
 * `GET /api/projects/{id}/flywheel/` (figures defined in annotation/flywheel.py), the chart
 * series over the versions in the order they were made, and each table cell's text, which says
 * why when there is nothing to show.
 */
import type { ChartSeries } from "../../ui/svgCharts";
import { counted, percent } from "../../ui/format";

export interface FlywheelRollouts {
  started: number;
  ended: number;
  validated: number;
  passed: number;
  success_rate: number | null;
  scored: number;
  task_success: number | null;
}

export interface FlywheelLive {
  accepted: number;
  corrected: number;
  error_kept: number;
  without_proposal: number;
  steps: number;
  rate: number | null;
}

export interface FlywheelOffline {
  evaluation: number;
  step_success_rate: number | null;
  steps: number;
  invalid: number;
  finished_at: string | null;
}

export interface DatasetSize {
  export: number;
  kind: "sft" | "dpo" | "ct";
  source: "interactive" | "rollout";
  samples: number | null;
  created_at: string;
}

export interface FlywheelVersion {
  id: number;
  name: string;
  parent: string | null;
  base_model: string;
  job: number | null;
  created_at: string;
  proposes: "A" | "B" | null;
  rollouts: FlywheelRollouts;
  live: FlywheelLive | null;
  offline: FlywheelOffline | null;
  trained_on: DatasetSize[];
  other_exports: number;
}

export interface Flywheel {
  project: number;
  acceptance_window_days: number;
  versions: FlywheelVersion[];
  datasets: DatasetSize[];
}

/** The rates on the chart, one line each over the versions (a gap where a version has none). */
export function rateSeries(versions: FlywheelVersion[]): ChartSeries[] {
  return [
    { name: "Rollout success rate (V = 1)", values: versions.map((v) => v.rollouts.success_rate) },
    { name: "Live acceptance rate", values: versions.map((v) => v.live?.rate ?? null) },
    { name: "Offline step success rate", values: versions.map((v) => v.offline?.step_success_rate ?? null) },
    { name: "Rollouts' mean task success", values: versions.map((v) => v.rollouts.task_success) },
  ];
}

/** Samples each version was trained on from this project's exports, per kind of data. */
export function trainedSeries(versions: FlywheelVersion[]): ChartSeries[] {
  return (["sft", "dpo"] as const).map((kind) => ({
    name: `${kind.toUpperCase()} samples trained on`,
    values: versions.map((v) => {
      const sizes = v.trained_on.filter((d) => d.kind === kind && d.samples !== null);
      return sizes.length ? sizes.reduce((sum, d) => sum + (d.samples ?? 0), 0) : null;
    }),
  }));
}

export function rolloutCell(r: FlywheelRollouts): string {
  if (r.started === 0) return "no rollouts of this version yet";
  const ran = `${r.ended} of ${counted(r.started, "rollout")} ended`;
  if (r.validated === 0) return `${ran}, none validated yet`;
  return `${percent(r.success_rate)}: ${r.passed} of ${r.validated} validated passed (${ran})`;
}

export function liveCell(live: FlywheelLive | null, windowDays: number): string {
  if (live === null) return `not used by people in the last ${windowDays} days`;
  if (live.steps === 0) return `no step decided on a valid proposal (${live.without_proposal} without one)`;
  return `${percent(live.rate)}: ${live.accepted} of ${counted(live.steps, "step")} accepted`;
}

export function offlineCell(offline: FlywheelOffline | null): string {
  if (offline === null) return "not evaluated on this project yet";
  return `${percent(offline.step_success_rate)} of ${counted(offline.steps, "held-out step")}`;
}

export function datasetText(d: DatasetSize): string {
  const samples = d.samples === null ? "size unknown" : counted(d.samples, "sample");
  return `${d.kind.toUpperCase()} (${d.source}) #${d.export}: ${samples}`;
}

export function trainedOnCell(v: Pick<FlywheelVersion, "job" | "trained_on" | "other_exports">): string {
  if (v.job === null) return "not fine-tuned here (registered as it is)";
  const here = v.trained_on.map(datasetText);
  if (v.other_exports) here.push(`${counted(v.other_exports, "export")} of other projects`);
  return here.length ? here.join("; ") : "its exports no longer exist";
}
