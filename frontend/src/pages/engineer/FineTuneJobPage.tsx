/**
 * One fine-tuning job: status and progress, its stages and settings, the loss curve, the logs,
 * the error it failed with, cancel (engineers, while it is queued or running) and the model
 * version it registered. The job is read again every two seconds while it is live.
 */
import { Link, useParams } from "react-router-dom";
import { api } from "../../api";
import { Button, ErrorBanner, Loading, useApi, useMe, usePoll, useSubmit } from "../../ui";
import { LineChart } from "../../ui/svgCharts";
import { when } from "../../ui/format";
import { JobStatus } from "./FineTuning";
import { LIVE_STATUSES, engineerProjects, lossChart, lossText, mayManage, type FineTuneJob, type LossPoint } from "./finetune";

function LossCurve({ curve }: { curve: LossPoint[] }) {
  if (curve.length === 0) return <p className="empty">No loss logged yet.</p>;
  const chart = lossChart(curve);
  const last = curve[curve.length - 1];
  const first = curve[0];
  return (
    <LineChart
      title="Training loss per logged step"
      testId="loss-chart"
      labels={chart.labels}
      series={chart.series}
      max={chart.max}
      format={lossText}
      dots={curve.length <= 80}
    >
      <p className="meta" data-testid="loss-summary">
        {curve.length} logged steps; first loss {first.loss.toFixed(4)} ({first.kind.toUpperCase()} step {first.step}), latest{" "}
        {last.loss.toFixed(4)} ({last.kind.toUpperCase()} step {last.step}).
      </p>
    </LineChart>
  );
}

function Settings({ title, values }: { title: string; values: Record<string, unknown> }) {
  const entries = Object.entries(values);
  return (
    <div>
      <h3>{title}</h3>
      {entries.length === 0 ? (
        <p className="meta">The defaults.</p>
      ) : (
        <dl className="kv kv-wide">
          {entries.map(([k, v]) => (
            <div key={k} className="kv-row">
              <dt>{k}</dt>
              <dd>{Array.isArray(v) ? v.join(", ") : v === null ? "auto" : String(v)}</dd>
            </div>
          ))}
        </dl>
      )}
    </div>
  );
}

export function FineTuneJobPage() {
  const { jobId = "" } = useParams();
  const me = useMe();
  const { data: job, error, reload } = useApi<FineTuneJob>(`/api/finetune-jobs/${jobId}/`);
  const cancelling = useSubmit();
  const live = job ? LIVE_STATUSES.has(job.status) : false;
  usePoll(reload, live);
  if (error) return <ErrorBanner error={error} />;
  if (!job) return <Loading />;
  const mayCancel = live && !job.cancel_requested && mayManage(engineerProjects(me), job.project_ids);
  const cancel = async () => {
    if (!window.confirm(`Cancel fine-tuning job ${job.id}? A running job stops after its current step.`)) return;
    await cancelling.run(async () => {
      await api.post(`/api/finetune-jobs/${job.id}/cancel/`);
      reload();
    });
  };
  return (
    <article aria-labelledby="job-heading">
      <p>
        <Link to="/engineer/finetune">← Fine-tuning jobs</Link>
      </p>
      <h2 id="job-heading">
        Fine-tuning job #{job.id}: {job.name}
      </h2>
      <ErrorBanner error={cancelling.error} onDismiss={cancelling.dismiss} />
      <section className="card job-summary">
        <dl className="kv kv-wide">
          <div className="kv-row">
            <dt>Status</dt>
            <dd data-testid="job-status">
              <JobStatus job={job} />
            </dd>
          </div>
          <div className="kv-row">
            <dt>Model version</dt>
            <dd data-testid="job-version">
              {job.model_version ? (
                <Link to={`/engineer/models/${job.model_version.id}`}>{job.model_version.name}</Link>
              ) : (
                `${job.version_name} (registered when the job succeeds)`
              )}
            </dd>
          </div>
          <div className="kv-row">
            <dt>Base model</dt>
            <dd>
              {job.base_model}
              {job.parent_version ? `, continuing ${job.parent_version}` : ""}
            </dd>
          </div>
          <div className="kv-row">
            <dt>Endpoint</dt>
            <dd>{job.base_url || "—"}</dd>
          </div>
          <div className="kv-row">
            <dt>Created</dt>
            <dd>
              {job.created_by ?? "—"}, {when(job.created_at)}
            </dd>
          </div>
          <div className="kv-row">
            <dt>Ran</dt>
            <dd>
              {when(job.started_at)} – {when(job.finished_at)} (attempt {job.attempt})
            </dd>
          </div>
        </dl>
        {job.error ? (
          <p className="warn" data-testid="job-error">
            {job.status === "cancelled" ? "Stopped: " : "Failed: "}
            {job.error}
          </p>
        ) : null}
        {mayCancel ? (
          <Button variant="danger" onClick={cancel}>
            Cancel job
          </Button>
        ) : null}
      </section>
      <section className="card" aria-labelledby="loss-heading">
        <h3 id="loss-heading">Loss curve</h3>
        <LossCurve curve={job.loss_curve} />
      </section>
      <section className="card" aria-labelledby="stages-heading">
        <h3 id="stages-heading">Stages</h3>
        <ol>
          {job.stages.map((s, i) => (
            <li key={i}>
              {s.kind.toUpperCase()} on dataset export {s.dataset.export_id}
              {s.dataset.content_hash ? (
                <>
                  {" "}
                  <code className="hash">sha256 {s.dataset.content_hash.slice(0, 16)}…</code>
                </>
              ) : null}
              , {s.dataset.files.filter((f) => f.name.endsWith(".parquet")).length} Parquet file(s)
            </li>
          ))}
        </ol>
        <div className="compare">
          <Settings title="LoRA" values={job.lora} />
          <Settings title="Hyperparameters" values={job.hyperparameters} />
        </div>
      </section>
      <section className="card" aria-labelledby="logs-heading">
        <h3 id="logs-heading">Logs</h3>
        {job.logs ? (
          <pre className="logs" tabIndex={0} aria-labelledby="logs-heading" data-testid="job-logs">
            {job.logs}
          </pre>
        ) : (
          <p className="empty">No log lines yet.</p>
        )}
      </section>
    </article>
  );
}
