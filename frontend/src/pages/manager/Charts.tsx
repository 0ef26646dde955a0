/** Charts over time: per-annotator throughput, and per model version the acceptance rate and,
 * beside it, the task success its episodes scored with their tasks' evaluators. */
import { useState } from "react";
import { ErrorBanner, Loading, useApi } from "../../ui";
import { BarChart, LineChart, bucketLabels } from "../../ui/svgCharts";
import { score } from "../../episode/evaluation";
import { percent, versionLabel } from "../../ui/format";
import type { Acceptance, Throughput } from "../../domain/api";

const SPANS: Record<string, { bucket: "hour" | "day"; hours: number; label: string }> = {
  "48h": { bucket: "hour", hours: 48, label: "Last 48 hours, by hour" },
  "14d": { bucket: "day", hours: 14 * 24, label: "Last 14 days, by day" },
  "60d": { bucket: "day", hours: 60 * 24, label: "Last 60 days, by day" },
};

export function ProjectCharts({ projectId }: { projectId: string }) {
  const [span, setSpan] = useState("14d");
  const [measure, setMeasure] = useState<"steps" | "episodes">("steps");
  const [now] = useState(() => new Date());
  const { bucket, hours } = SPANS[span];
  const since = new Date(now.getTime() - hours * 3600_000).toISOString();
  const range = `bucket=${bucket}&since=${encodeURIComponent(since)}&until=${encodeURIComponent(now.toISOString())}`;
  const throughput = useApi<Throughput>(`/api/projects/${projectId}/throughput/?${range}`);
  const acceptance = useApi<Acceptance>(`/api/projects/${projectId}/acceptance/?${range}`);
  return (
    <section aria-labelledby="charts-heading">
      <div className="range-form">
        <h2 id="charts-heading">Throughput, acceptance and task success</h2>
        <label className="field">
          Period
          <select value={span} onChange={(e) => setSpan(e.target.value)}>
            {Object.entries(SPANS).map(([value, s]) => (
              <option key={value} value={value}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          Throughput measure
          <select value={measure} onChange={(e) => setMeasure(e.target.value as "steps" | "episodes")}>
            <option value="steps">Steps decided</option>
            <option value="episodes">Episodes submitted</option>
          </select>
        </label>
      </div>
      <ErrorBanner error={throughput.error ?? acceptance.error} />
      {!throughput.data || !acceptance.data ? <Loading /> : null}
      <div className="charts">
        {throughput.data ? (
          <div>
            <BarChart
              title={measure === "steps" ? "Steps decided per annotator" : "Episodes submitted per annotator"}
              testId="throughput-chart"
              labels={bucketLabels(throughput.data.buckets, throughput.data.bucket)}
              series={throughput.data.annotators.map((a) => ({
                name: a.annotator,
                values: a.points.map((p) => (measure === "steps" ? p.steps : p.episodes)),
              }))}
            />
            <table className="table" data-testid="throughput-table">
              <caption>Totals for the period</caption>
              <thead>
                <tr>
                  <th scope="col">Annotator</th>
                  <th scope="col">Steps decided</th>
                  <th scope="col">Episodes submitted</th>
                </tr>
              </thead>
              <tbody>
                {throughput.data.annotators.length === 0 ? (
                  <tr>
                    <td colSpan={3}>No steps were decided in this period.</td>
                  </tr>
                ) : null}
                {throughput.data.annotators.map((a) => (
                  <tr key={a.annotator}>
                    <td>{a.annotator}</td>
                    <td>{a.steps}</td>
                    <td>{a.episodes}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
        {acceptance.data ? (
          <div>
            <LineChart
              title="Acceptance rate of the model's proposals, per model version"
              testId="acceptance-chart"
              labels={bucketLabels(acceptance.data.buckets, acceptance.data.bucket)}
              series={acceptance.data.versions.map((v) => ({ name: versionLabel(v.model_version), values: v.points.map((p) => p.rate) }))}
            />
            <table className="table" data-testid="acceptance-table">
              <caption>Decisions on the model&apos;s proposals for the period</caption>
              <thead>
                <tr>
                  <th scope="col">Model version</th>
                  <th scope="col">Accepted</th>
                  <th scope="col">Corrected</th>
                  <th scope="col">Error kept</th>
                  <th scope="col">Acceptance rate</th>
                  <th scope="col">No valid proposal</th>
                </tr>
              </thead>
              <tbody>
                {acceptance.data.versions.length === 0 ? (
                  <tr>
                    <td colSpan={6}>No decided steps in this period.</td>
                  </tr>
                ) : null}
                {acceptance.data.versions.map((v) => (
                  <tr key={v.model_version}>
                    <td>{versionLabel(v.model_version)}</td>
                    <td>{v.total.accepted}</td>
                    <td>{v.total.corrected}</td>
                    <td>{v.total.error_kept}</td>
                    <td>{percent(v.total.rate)}</td>
                    <td>{v.total.without_proposal}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
        {acceptance.data ? <TaskSuccessChart acceptance={acceptance.data} /> : null}
      </div>
    </section>
  );
}

/** Task success per model version, in the acceptance chart's buckets and colours. */
function TaskSuccessChart({ acceptance }: { acceptance: Acceptance }) {
  const overall = acceptance.task_success;
  return (
    <div>
      <LineChart
        title="Mean task success of the episodes, per model version"
        testId="task-success-chart"
        labels={bucketLabels(acceptance.buckets, acceptance.bucket)}
        format={(v) => v.toFixed(2)}
        series={acceptance.versions.map((v) => ({ name: versionLabel(v.model_version), values: v.task_success.points.map((p) => p.mean) }))}
      />
      <table className="table" data-testid="task-success-table">
        <caption>
          Episodes scored by their task&apos;s evaluator in the period: {overall.scored}, mean task success {score(overall.mean)}
        </caption>
        <thead>
          <tr>
            <th scope="col">Model version</th>
            <th scope="col">Episodes scored</th>
            <th scope="col">Mean task success</th>
            <th scope="col">Success rate (scored 1)</th>
            <th scope="col">Acceptance rate</th>
            <th scope="col">Not scored (evaluator failed)</th>
          </tr>
        </thead>
        <tbody>
          {acceptance.versions.length === 0 ? (
            <tr>
              <td colSpan={6}>No episode was scored in this period.</td>
            </tr>
          ) : null}
          {acceptance.versions.map((v) => (
            <tr key={v.model_version}>
              <td>{versionLabel(v.model_version)}</td>
              <td>{v.task_success.scored}</td>
              <td>{score(v.task_success.mean)}</td>
              <td>{percent(v.task_success.success_rate)}</td>
              <td>{percent(v.total.rate)}</td>
              <td>{v.task_success.failed}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
