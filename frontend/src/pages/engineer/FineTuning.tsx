/**
 * Fine-tuning jobs: the list with each job's status and progress (read again while any runs),
 * and the form that starts one — dataset exports as stages (SFT, then DPO), a base model the
 * deployment knows or a version to continue, LoRA and hyperparameters with the server's
 * defaults. Engineers create jobs; managers read them (the server enforces both).
 */
import { useMemo, useState } from "react";
import { Link, useNavigate } from "react-router-dom";
import { api, type Page, type Project } from "../../api";
import { Button, CheckField, ErrorBanner, Loading, NumberField, Problem, Table, useApi, useMe, usePoll, useSubmit } from "../../ui";
import { when } from "../../ui/format";
import {
  LIVE_STATUSES,
  defaultForm,
  engineerProjects,
  jobRequest,
  stageOrder,
  costLines,
  stagesText,
  unusableBecause,
  type CostEstimate,
  withBaseModel,
  type DatasetExport,
  type FineTuneJob,
  type JobForm,
  type ModelVersion,
  type TrainingDefaults,
} from "./finetune";

export function JobStatus({ job }: { job: Pick<FineTuneJob, "id" | "status" | "progress" | "cancel_requested"> }) {
  const live = LIVE_STATUSES.has(job.status);
  return (
    <span className="job-status">
      <span className={`badge badge-status-${job.status}`}>{job.status}</span>
      {job.cancel_requested && live ? <span className="meta"> (cancelling)</span> : null}
      {live || job.status === "cancelled" || job.status === "failed" ? (
        <>
          {" "}
          <progress className="progress" max={1} value={job.progress} aria-label={`Job ${job.id} progress`} />{" "}
          {Math.round(job.progress * 100)}%
        </>
      ) : null}
    </span>
  );
}

function exportLabel(e: DatasetExport, projects: Map<number, string>): string {
  const samples = Object.entries(e.counts ?? {})
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(", ");
  return `#${e.id} ${e.kind.toUpperCase()} · ${projects.get(e.project) ?? `project ${e.project}`} · ${when(e.created_at)}${samples ? ` · ${samples}` : ""}`;
}

function NewJobForm({ defaults }: { defaults: TrainingDefaults }) {
  const navigate = useNavigate();
  const me = useMe();
  const allowed = engineerProjects(me);
  const projects = useApi<Page<Project>>("/api/projects/?page_size=200");
  // Not `?format=trl`: DRF reads `format` as the response format; the list says which exports
  // cannot be trained on, and why.
  const exportsList = useApi<Page<DatasetExport>>("/api/exports/?status=succeeded&page_size=200");
  const versions = useApi<Page<ModelVersion>>("/api/model-versions/?page_size=200");
  const [form, setForm] = useState<JobForm>(() =>
    defaultForm(defaults.defaults, defaults.base_models[0]?.name ?? "", defaults.base_models[0]?.endpoint ?? ""),
  );
  const [problems, setProblems] = useState<Record<string, string>>({});
  const { error, busy, dismiss, run } = useSubmit();
  const names = useMemo(() => new Map((projects.data?.results ?? []).map((p) => [p.id, p.name])), [projects.data]);
  const candidates = (exportsList.data?.results ?? []).filter(
    (e) => (e.kind === "sft" || e.kind === "dpo") && (allowed === "all" || allowed.has(e.project)),
  );
  const set = (change: Partial<JobForm>) => setForm((old) => ({ ...old, ...change }));
  const setLora = (change: Partial<JobForm["lora"]>) => setForm((old) => ({ ...old, lora: { ...old.lora, ...change } }));
  const setHp = (change: Partial<JobForm["hp"]>) => setForm((old) => ({ ...old, hp: { ...old.hp, ...change } }));
  const toggle = (e: DatasetExport) =>
    set({ exports: form.exports.some((x) => x.id === e.id) ? form.exports.filter((x) => x.id !== e.id) : [...form.exports, e] });
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    const result = jobRequest(form);
    if ("problems" in result) {
      dismiss();
      setProblems(result.problems);
      return;
    }
    setProblems({});
    void run(async () => {
      const job = await api.post<FineTuneJob>("/api/finetune-jobs/", result.body);
      navigate(`/engineer/finetune/${job.id}`);
    });
  };
  const [estimate, setEstimate] = useState<CostEstimate | null>(null);
  const askEstimate = () => {
    const result = jobRequest(form);
    if ("problems" in result) {
      setProblems(result.problems);
      return;
    }
    const { exports, base_model, parent_version, hyperparameters } = result.body;
    void run(async () => {
      setEstimate(await api.post<CostEstimate>("/api/finetune-jobs/estimate/", { exports, base_model, parent_version, hyperparameters }));
    });
  };
  const order = stageOrder(form.exports);
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-job" noValidate>
      <h2 id="new-job">New fine-tuning job</h2>
      <ErrorBanner error={error ?? exportsList.error ?? versions.error} onDismiss={dismiss} />
      <fieldset aria-describedby="stages-help">
        <legend>Datasets (stages)</legend>
        <p className="meta" id="stages-help">
          Succeeded TRL exports of your projects. SFT stages run first, then DPO stages on the SFT adapter (the UI-TARS recipe).
        </p>
        {exportsList.loading && !exportsList.data ? <Loading /> : null}
        {exportsList.data && candidates.length === 0 ? (
          <p className="empty">
            No succeeded SFT or DPO export in TRL format yet: ask for one under <Link to="/engineer/exports">Dataset exports</Link>.
          </p>
        ) : null}
        {candidates.map((e) => {
          const reason = unusableBecause(e);
          return (
            <label key={e.id} className={reason ? "disabled-choice" : undefined}>
              <input
                type="checkbox"
                checked={form.exports.some((x) => x.id === e.id)}
                disabled={reason !== null}
                onChange={() => toggle(e)}
              />{" "}
              {exportLabel(e, names)}
              {reason ? <span className="meta"> — cannot be trained on: {reason}</span> : null}
            </label>
          );
        })}
        <Problem id="exports-problem" text={problems.exports} />
        {order.length > 0 ? (
          <p data-testid="stage-order">
            Stages: {order.map((e, i) => `${i + 1}. ${e.kind.toUpperCase()} on export ${e.id}`).join(" → ")}
          </p>
        ) : null}
      </fieldset>
      <div className="form-row">
        <label className="field">
          Base model
          <select
            value={form.baseModel}
            onChange={(e) => setForm((old) => withBaseModel(old, e.target.value, defaults.base_models))}
            disabled={form.parentVersion !== ""}
            aria-invalid={problems.baseModel ? true : undefined}
            aria-describedby={problems.baseModel ? "base-problem" : undefined}
          >
            {defaults.base_models.length === 0 ? <option value="">None: the deployment lists them in TANDEM_BASE_MODELS</option> : null}
            {defaults.base_models.map((m) => (
              <option key={m.name} value={m.name}>
                {m.name}
              </option>
            ))}
          </select>
          <Problem id="base-problem" text={problems.baseModel} />
        </label>
        <label className="field">
          Or continue from version
          <select value={form.parentVersion} onChange={(e) => set({ parentVersion: e.target.value })}>
            <option value="">— none —</option>
            {(versions.data?.results ?? []).map((v) => (
              <option key={v.id} value={v.name}>
                {v.name}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          New version name
          <input
            required
            value={form.versionName}
            onChange={(e) => set({ versionName: e.target.value })}
            maxLength={200}
            aria-invalid={problems.versionName ? true : undefined}
            aria-describedby={problems.versionName ? "version-problem" : undefined}
          />
          <Problem id="version-problem" text={problems.versionName} />
        </label>
        <label className="field">
          Job name (optional)
          <input value={form.name} onChange={(e) => set({ name: e.target.value })} maxLength={200} />
        </label>
        <label className="field grow">
          Endpoint that will serve it (optional)
          <input
            type="url"
            value={form.baseUrl}
            onChange={(e) => set({ baseUrl: e.target.value })}
            placeholder="http://gpu-host:8001/v1"
          />
        </label>
      </div>
      <fieldset>
        <legend>LoRA</legend>
        <div className="form-row">
          <NumberField id="lora-r" label="Rank r" value={form.lora.r} onChange={(r) => setLora({ r })} problem={problems.r} />
          <NumberField id="lora-alpha" label="Alpha" value={form.lora.alpha} onChange={(alpha) => setLora({ alpha })} problem={problems.alpha} />
          <NumberField id="lora-dropout" label="Dropout" value={form.lora.dropout} onChange={(dropout) => setLora({ dropout })} problem={problems.dropout} />
          <label className="field grow">
            Target modules
            <input
              value={form.lora.targetModules}
              onChange={(e) => setLora({ targetModules: e.target.value })}
              aria-invalid={problems.targetModules ? true : undefined}
              aria-describedby={problems.targetModules ? "modules-problem" : undefined}
            />
            <Problem id="modules-problem" text={problems.targetModules} />
          </label>
        </div>
      </fieldset>
      <fieldset>
        <legend>Hyperparameters</legend>
        <div className="form-row">
          <NumberField id="hp-lr" label="Learning rate" value={form.hp.learningRate} onChange={(learningRate) => setHp({ learningRate })} problem={problems.learningRate} />
          <NumberField id="hp-epochs" label="Epochs" value={form.hp.epochs} onChange={(epochs) => setHp({ epochs })} problem={problems.epochs} />
          <NumberField id="hp-max-steps" label="Max steps (overrides epochs)" value={form.hp.maxSteps} onChange={(maxSteps) => setHp({ maxSteps })} problem={problems.maxSteps} hint="by epochs" />
          <NumberField id="hp-batch" label="Batch size" value={form.hp.batchSize} onChange={(batchSize) => setHp({ batchSize })} problem={problems.batchSize} />
          <NumberField
            id="hp-accumulation"
            label="Gradient accumulation"
            value={form.hp.gradientAccumulationSteps}
            onChange={(gradientAccumulationSteps) => setHp({ gradientAccumulationSteps })}
            problem={problems.gradientAccumulationSteps}
          />
          <NumberField id="hp-beta" label="DPO beta" value={form.hp.beta} onChange={(beta) => setHp({ beta })} problem={problems.beta} />
          <NumberField id="hp-seed" label="Seed" value={form.hp.seed} onChange={(seed) => setHp({ seed })} problem={problems.seed} />
          <label className="field">
            bf16
            <select value={form.hp.bf16} onChange={(e) => setHp({ bf16: e.target.value as JobForm["hp"]["bf16"] })}>
              <option value="auto">Where the GPU supports it</option>
              <option value="on">On</option>
              <option value="off">Off</option>
            </select>
          </label>
          <CheckField
            label="Gradient checkpointing"
            checked={form.hp.gradientCheckpointing}
            onChange={(gradientCheckpointing) => setHp({ gradientCheckpointing })}
          />
          <NumberField
            id="hp-uncheckpointed-layers"
            label="Layers kept out of checkpointing (faster, more memory)"
            value={form.hp.uncheckpointedLayers}
            onChange={(uncheckpointedLayers) => setHp({ uncheckpointedLayers })}
            problem={problems.uncheckpointedLayers}
          />
          <NumberField
            id="hp-vision-cache-gib"
            label="GPU memory for encoded screenshots, GiB (0: each step's own)"
            value={form.hp.visionCacheGib}
            onChange={(visionCacheGib) => setHp({ visionCacheGib })}
            problem={problems.visionCacheGib}
          />
          <CheckField
            label="Checkpointed layers keep their attention output (faster, about 3 GiB on a 7B)"
            checked={form.hp.keepAttention}
            onChange={(keepAttention) => setHp({ keepAttention })}
          />
          <CheckField
            label="DPO: each pair's prompt through the model once"
            checked={form.hp.dpoSharedPrompt}
            onChange={(dpoSharedPrompt) => setHp({ dpoSharedPrompt })}
          />
          <NumberField id="hp-max-length" label="Max tokens per row" value={form.hp.maxLength} onChange={(maxLength) => setHp({ maxLength })} problem={problems.maxLength} />
        </div>
      </fieldset>
      <section aria-label="Cost estimate">
        <Button type="button" disabled={busy} disabledReason="Measuring the rows…" onClick={askEstimate}>
          Estimate cost
        </Button>
        {estimate ? (
          <ul data-testid="cost-estimate">
            {costLines(estimate).map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
        ) : null}
      </section>
      <Button type="submit" variant="primary" disabled={busy} disabledReason="Starting the job…">
        Start fine-tuning
      </Button>
    </form>
  );
}

export function FineTuning({ project }: { project?: string }) {
  const me = useMe();
  const allowed = engineerProjects(me);
  const mayCreate = !project && (allowed === "all" || allowed.size > 0);
  const jobs = useApi<Page<FineTuneJob>>(`/api/finetune-jobs/?page_size=100${project ? `&project=${project}` : ""}`);
  const defaults = useApi<TrainingDefaults>(mayCreate ? "/api/finetune-jobs/base-models/" : null);
  const anyLive = (jobs.data?.results ?? []).some((j) => LIVE_STATUSES.has(j.status));
  usePoll(jobs.reload, anyLive);
  return (
    <>
      {mayCreate && defaults.data ? <NewJobForm defaults={defaults.data} /> : null}
      <ErrorBanner error={defaults.error} />
      <section className="card" aria-labelledby="jobs-heading">
        <h2 id="jobs-heading">Fine-tuning jobs</h2>
        <ErrorBanner error={jobs.error} />
        {jobs.loading && !jobs.data ? <Loading /> : null}
        {jobs.data ? (
          <Table
            rows={jobs.data.results}
            rowKey={(j) => j.id}
            empty="No fine-tuning jobs yet."
            columns={[
              { header: "Job", cell: (j) => <Link to={`/engineer/finetune/${j.id}`}>{`#${j.id} ${j.name}`}</Link> },
              { header: "Status", cell: (j) => <JobStatus job={j} /> },
              { header: "Stages", cell: (j) => stagesText(j.stages) },
              { header: "Base model", cell: (j) => (j.parent_version ? `${j.base_model}, continuing ${j.parent_version}` : j.base_model) },
              { header: "Created", cell: (j) => `${j.created_by ?? "—"}, ${when(j.created_at)}` },
              {
                header: "Model version",
                cell: (j) => (j.model_version ? <Link to={`/engineer/models/${j.model_version.id}`}>{j.model_version.name}</Link> : "—"),
              },
            ]}
          />
        ) : null}
      </section>
    </>
  );
}
