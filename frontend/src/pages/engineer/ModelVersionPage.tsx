/**
 * One model version: what it is (base model, adapter, endpoint) and where it came from
 * (lineage: the datasets with their hashes, the parent version, the job, library versions);
 * serving it on its endpoint, with the endpoint's own error when it refuses; offline
 * evaluations on a project's held-out steps (step success rate, counts, invalid outputs), and
 * that project's live acceptance rate next to them. Engineers serve and evaluate.
 */
import { useEffect, useRef, useState } from "react";
import { Link, useParams } from "react-router-dom";
import { api } from "../../api";
import { Button, ErrorBanner, Loading, ProjectSelect, useApi, useMe, usePoll, useReadableProjects, useSubmit } from "../../ui";
import { counted, percent, when } from "../../ui/format";
import { ServingStatus } from "./ModelVersions";
import { VersionComparison } from "./VersionComparison";
import {
  LIVE_STATUSES,
  engineerProjects,
  evaluationProject,
  type Evaluation,
  type ModelVersion,
  type ProjectVersions,
} from "./finetune";

function Lineage({ version }: { version: ModelVersion }) {
  const datasets = version.lineage.datasets ?? [];
  const libraries = Object.entries(version.lineage.libraries ?? {});
  return (
    <section className="card" aria-labelledby="lineage-heading">
      <h3 id="lineage-heading">Lineage</h3>
      <dl className="kv kv-wide">
        <div className="kv-row">
          <dt>Job</dt>
          <dd>{version.job ? <Link to={`/engineer/finetune/${version.job}`}>Fine-tuning job #{version.job}</Link> : "registered, not trained here"}</dd>
        </div>
        <div className="kv-row">
          <dt>Parent version</dt>
          <dd>{version.parent ?? "none: trained from the base model"}</dd>
        </div>
        {version.lineage.run ? (
          <div className="kv-row">
            <dt>Run record</dt>
            <dd>
              <code>{version.lineage.run}</code>
            </dd>
          </div>
        ) : null}
      </dl>
      {datasets.length > 0 ? (
        <table className="table" data-testid="lineage-datasets">
          <caption>Datasets trained on, in stage order</caption>
          <thead>
            <tr>
              <th scope="col">Export</th>
              <th scope="col">Kind</th>
              <th scope="col">Content hash</th>
              <th scope="col">Files (sha256)</th>
            </tr>
          </thead>
          <tbody>
            {datasets.map((d, i) => (
              <tr key={i}>
                <td>#{d.export_id}</td>
                <td>{d.kind.toUpperCase()}</td>
                <td>
                  <code className="hash">{d.content_hash || "—"}</code>
                </td>
                <td>
                  {d.files.map((f) => (
                    <div key={f.name}>
                      {f.name} <code className="hash">{f.sha256.slice(0, 16)}…</code>
                    </div>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {libraries.length > 0 ? (
        <p className="meta">Trained with {libraries.map(([k, v]) => `${k} ${v}`).join(", ")}.</p>
      ) : null}
    </section>
  );
}

function EvaluationRow({ run, projects }: { run: Evaluation; projects: Map<number, string> }) {
  const live = LIVE_STATUSES.has(run.status);
  return (
    <tr data-testid={`evaluation-${run.id}`}>
      <td>{projects.get(run.project_id) ?? `project ${run.project_id}`}</td>
      <td>
        {run.status}
        {live ? (
          <>
            {" "}
            <progress className="progress" max={1} value={run.progress} aria-label={`Evaluation ${run.id} progress`} />
          </>
        ) : null}
        {run.error ? <p className="warn">{run.error}</p> : null}
      </td>
      <td data-testid="step-success-rate">{percent(run.success_rate)}</td>
      <td>
        {run.succeeded} of {run.total}
      </td>
      <td>{run.invalid}</td>
      <td>
        {Object.entries(run.by_action)
          .map(([action, c]) => `${action} ${c.succeeded}/${c.total}`)
          .join(", ") || "—"}
      </td>
      <td>{when(run.finished_at ?? run.created_at)}</td>
    </tr>
  );
}

function Evaluations({ version, mayAct, onStarted }: { version: ModelVersion; mayAct: boolean; onStarted: () => void }) {
  const me = useMe();
  const allowed = engineerProjects(me);
  const [project, setProject] = useState("");
  const { readable, project: listed } = useReadableProjects(project);
  const chosen = project || evaluationProject(version, readable.map((p) => p.id)) || listed;
  const names = new Map(readable.map((p) => [p.id, p.name]));
  const [tolerance, setTolerance] = useState("5");
  const action = useSubmit();
  const runs = useApi<Evaluation[]>(`/api/model-versions/${version.id}/evaluations/`);
  const overview = useApi<ProjectVersions>(chosen ? `/api/projects/${chosen}/model-versions/` : null);
  const anyLive = (runs.data ?? []).some((r) => LIVE_STATUSES.has(r.status));
  usePoll(runs.reload, anyLive);
  // When a run ends, the project's figures change too.
  const finished = runs.data ? runs.data.filter((r) => !LIVE_STATUSES.has(r.status)).length : null;
  const seenFinished = useRef<number | null>(null);
  const reloadOverview = overview.reload;
  useEffect(() => {
    if (finished === null) return;
    if (seenFinished.current !== null && seenFinished.current !== finished) reloadOverview();
    seenFinished.current = finished;
  }, [finished, reloadOverview]);
  const evaluateBlocked = !version.base_url
    ? "This version has no endpoint to ask: set one above."
    : chosen === ""
      ? "Choose a project whose held-out steps it is evaluated on."
      : allowed !== "all" && !allowed.has(Number(chosen))
        ? "Only the project's engineers evaluate on its steps."
        : undefined;
  const mayEvaluate = mayAct && evaluateBlocked === undefined;
  const start = action.onSubmit(async () => {
    await api.post(`/api/model-versions/${version.id}/evaluations/`, {
      project: Number(chosen),
      tolerance: Number(tolerance) / 100,
    });
    runs.reload();
    onStarted();
  });
  const row = overview.data?.versions.find((v) => v.model_version === version.name);
  return (
    <section className="card" aria-labelledby="evaluations-heading">
      <h3 id="evaluations-heading">Offline evaluation</h3>
      <form className="form-row" onSubmit={start} aria-label="Start an evaluation">
        <ProjectSelect projects={readable} value={chosen} onChange={setProject} />
        {mayAct ? (
          <>
            <label className="field">
              Point tolerance (% of the screen diagonal)
              <input type="number" min={0.1} max={100} step={0.1} value={tolerance} onChange={(e) => setTolerance(e.target.value)} />
            </label>
            <Button type="submit" variant="primary" disabled={!mayEvaluate} disabledReason={evaluateBlocked}>
              Evaluate on held-out steps
            </Button>
          </>
        ) : null}
      </form>
      <ErrorBanner error={action.error ?? runs.error ?? overview.error} onDismiss={action.dismiss} />
      {overview.data ? (
        <p data-testid="live-vs-offline" className="live-vs-offline">
          In this project: live acceptance rate <strong>{row?.live ? percent(row.live.rate) : "—"}</strong>
          {row?.live ? ` (${row.live.accepted} accepted, ${row.live.corrected} corrected, ${row.live.error_kept} error kept)` : " (not used live yet)"}
          {" · "}offline step success rate <strong>{row?.offline ? percent(row.offline.step_success_rate) : "—"}</strong>
          {row?.offline ? ` (${counted(row.offline.steps, "step")}, ${counted(row.offline.invalid, "invalid output")})` : " (not evaluated yet)"}
        </p>
      ) : null}
      {runs.data && runs.data.length > 0 ? (
        <table className="table" data-testid="evaluations-table">
          <caption>Evaluations of {version.name}</caption>
          <thead>
            <tr>
              <th scope="col">Project</th>
              <th scope="col">Status</th>
              <th scope="col">Step success rate</th>
              <th scope="col">Steps right</th>
              <th scope="col">Invalid outputs</th>
              <th scope="col">By action</th>
              <th scope="col">When</th>
            </tr>
          </thead>
          <tbody>
            {runs.data.map((run) => (
              <EvaluationRow key={run.id} run={run} projects={names} />
            ))}
          </tbody>
        </table>
      ) : runs.data ? (
        <p className="empty">Not evaluated yet.</p>
      ) : null}
      {overview.data ? (
        <VersionComparison overview={overview.data} caption="All versions in this project" />
      ) : null}
    </section>
  );
}

/** Where the version is served: an OpenAI-compatible base URL, checked again by *serve*. */
function EndpointForm({ version, onSaved }: { version: ModelVersion; onSaved: () => void }) {
  const [url, setUrl] = useState(version.base_url);
  const saving = useSubmit();
  const unchanged = url.trim() === version.base_url;
  const save = saving.onSubmit(async () => {
    await api.post(`/api/model-versions/${version.id}/endpoint/`, { base_url: url.trim() });
    onSaved();
  });
  return (
    <form className="form-row" onSubmit={save} aria-label="Endpoint of this version">
      <label className="field">
        Endpoint (OpenAI-compatible base URL)
        <input value={url} onChange={(e) => setUrl(e.target.value)} placeholder="http://vllm:8000/v1" size={36} />
      </label>
      <Button
        type="submit"
        disabled={unchanged || !url.trim()}
        disabledReason={!url.trim() ? "Give the endpoint's URL." : "This is its endpoint already."}
      >
        Set endpoint
      </Button>
      <ErrorBanner error={saving.error} onDismiss={saving.dismiss} />
    </form>
  );
}

export function ModelVersionPage() {
  const { versionId = "" } = useParams();
  const me = useMe();
  const allowed = engineerProjects(me);
  const mayAct = allowed === "all" || allowed.size > 0;
  const { data: version, error, reload } = useApi<ModelVersion>(`/api/model-versions/${versionId}/`);
  const serving = useSubmit();
  usePoll(reload, version?.serving_status === "loading");
  if (error) return <ErrorBanner error={error} />;
  if (!version) return <Loading />;
  const serve = () =>
    serving.run(async () => {
      await api.post(`/api/model-versions/${version.id}/serve/`);
      reload();
    });
  return (
    <article aria-labelledby="version-heading">
      <p>
        <Link to="/engineer/models">← Model versions</Link>
      </p>
      <h2 id="version-heading">Model version {version.name}</h2>
      <ErrorBanner error={serving.error} onDismiss={serving.dismiss} />
      <section className="card">
        <dl className="kv kv-wide">
          <div className="kv-row">
            <dt>Base model</dt>
            <dd>{version.base_model}</dd>
          </div>
          <div className="kv-row">
            <dt>Adapter</dt>
            <dd>{version.adapter_location ? <code>{version.adapter_location}</code> : "none: the base model itself"}</dd>
          </div>
          <div className="kv-row">
            <dt>Served as</dt>
            <dd>
              <code>{version.served_name}</code> on {version.base_url || "no endpoint"} ({version.coordinate_style})
            </dd>
          </div>
          <div className="kv-row">
            <dt>Serving</dt>
            <dd data-testid="serving-status">
              <ServingStatus version={version} />
              {version.served_at ? <span className="meta"> since {when(version.served_at)}</span> : null}
            </dd>
          </div>
          <div className="kv-row">
            <dt>Created</dt>
            <dd>{when(version.created_at)}</dd>
          </div>
        </dl>
        {mayAct ? (
          <div className="form-row">
            <Button
              variant="primary"
              onClick={serve}
              disabled={version.serving_status === "loading" || !version.base_url}
              disabledReason={
                version.serving_status === "loading"
                  ? "Being loaded on the endpoint…"
                  : "This version has no endpoint to serve it: set one below."
              }
            >
              {version.serving_status === "serving" ? "Load on the endpoint again" : "Serve on its endpoint"}
            </Button>
          </div>
        ) : null}
        {mayAct ? <EndpointForm version={version} onSaved={reload} /> : null}
      </section>
      <Lineage version={version} />
      <Evaluations version={version} mayAct={mayAct} onStarted={reload} />
    </article>
  );
}
