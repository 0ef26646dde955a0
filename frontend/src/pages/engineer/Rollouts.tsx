/**
 * A project's rollout batches: the list (versions, tasks × k, status and progress, V=1 and V=0
 * counts), the form that starts a batch, and the project's validation settings (the judge model,
 * the minimum task success, human review). Managers and engineers start batches and change the
 * settings; reviewers read the list. The project is chosen on the page, or fixed by the project
 * page that shows its batches.
 */
import { useMemo, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router-dom";
import { api, type Page } from "../../api";
import {
  Button,
  ErrorBanner,
  Loading,
  NumberField,
  Problem,
  ProjectSelect,
  Table,
  useApi,
  useMe,
  usePoll,
  useReadableProjects,
  useSubmit,
} from "../../ui";
import { when } from "../../ui/format";
import type { ModelVersion } from "./finetune";
import {
  MAX_SAMPLES,
  batchLive,
  batchRequest,
  cannotStartBecause,
  defaultBatchForm,
  mayRunRollouts,
  sizeText,
  validationForm,
  validationRequest,
  versionsText,
  type BatchForm,
  type RolloutBatch,
  type RolloutPaths,
  type RunnableTasks,
  type ValidationForm,
  type ValidationSettings,
} from "./rollouts";

export function BatchStatusBadge({ batch }: { batch: Pick<RolloutBatch, "id" | "status" | "progress" | "finished_at"> }) {
  return (
    <span className="job-status">
      <span className={`badge badge-status-${batch.status}`}>{batch.status}</span>
      {batch.status === "cancelled" && batch.finished_at === null ? <span className="meta"> (running rollouts stop)</span> : null}{" "}
      <progress className="progress" max={1} value={batch.progress} aria-label={`Batch ${batch.id} progress`} /> {Math.round(batch.progress * 100)}%
    </span>
  );
}

/** The problems left once the fields in `change` were edited (the tasks' problem goes with
 * the choice of tasks). */
function withoutProblems(problems: Record<string, string>, change: object): Record<string, string> {
  const edited = new Set(Object.keys(change));
  if (edited.has("chosen") || edited.has("taskMode")) edited.add("tasks");
  return Object.fromEntries(Object.entries(problems).filter(([field]) => !edited.has(field)));
}

function BatchList({ project, paths }: { project: string; paths: RolloutPaths }) {
  const list = useApi<Page<RolloutBatch>>(`/api/rollout-batches/?project=${project}&page_size=100`);
  const { reload } = list;
  usePoll(reload, (list.data?.results ?? []).some(batchLive));
  return (
    <section className="card" aria-labelledby="batches-heading">
      <h2 id="batches-heading">Rollout batches</h2>
      <ErrorBanner error={list.error} />
      {list.loading && !list.data ? <Loading /> : null}
      {list.data ? (
        <div data-testid="batches-table">
          <Table
            rows={list.data.results}
            rowKey={(b) => b.id}
            empty="No rollout batch of this project yet."
            columns={[
              {
                header: "Batch",
                cell: (b) => <Link to={paths.batch(b.id)}>{`#${b.id}${b.name ? ` ${b.name}` : ""}`}</Link>,
              },
              { header: "Versions", cell: (b) => versionsText(b) },
              { header: "Tasks × k", cell: (b) => sizeText(b) },
              { header: "Status", cell: (b) => <BatchStatusBadge batch={b} /> },
              {
                header: "V=1 / V=0",
                cell: (b) => (
                  <span data-testid={`verdicts-${b.id}`}>
                    {b.counts.passed ?? 0} / {b.counts.failed ?? 0}
                  </span>
                ),
              },
              { header: "Created", cell: (b) => `${when(b.created_at)} by ${b.created_by}` },
            ]}
          />
        </div>
      ) : null}
    </section>
  );
}

function TaskPicker({
  tasks,
  chosen,
  onChange,
  problem,
}: {
  tasks: RunnableTasks;
  chosen: string[];
  onChange: (chosen: string[]) => void;
  problem?: string;
}) {
  const [filter, setFilter] = useState("");
  const needle = filter.trim().toLowerCase();
  const shown = tasks.runnable.filter(
    (t) => !needle || t.external_id.toLowerCase().includes(needle) || t.instruction.toLowerCase().includes(needle),
  );
  const set = new Set(chosen);
  const toggle = (id: string) => onChange(set.has(id) ? chosen.filter((c) => c !== id) : [...chosen, id]);
  return (
    <div className="task-picker">
      <div className="form-row">
        <label className="field">
          Find tasks
          <input value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="id or instruction" />
        </label>
        <span className="meta" data-testid="chosen-count">
          {chosen.length} of {tasks.runnable.length} chosen
        </span>
        <Button onClick={() => onChange([...new Set([...chosen, ...shown.map((t) => t.external_id)])])} disabled={shown.length === 0} disabledReason="No task matches.">
          Choose all shown
        </Button>
        <Button onClick={() => onChange([])} disabled={chosen.length === 0} disabledReason="None is chosen.">
          Clear
        </Button>
      </div>
      <ul className="task-choices" aria-label="Runnable tasks">
        {shown.map((t) => (
          <li key={t.external_id}>
            <label>
              <input type="checkbox" checked={set.has(t.external_id)} onChange={() => toggle(t.external_id)} aria-label={`Run task ${t.external_id}`} />{" "}
              <code>{t.external_id}</code> <span className="meta">{t.instruction}</span>
            </label>
          </li>
        ))}
      </ul>
      <Problem id="tasks-problem" text={problem} />
    </div>
  );
}

function NewBatchForm({ project, paths }: { project: string; paths: RolloutPaths }) {
  const navigate = useNavigate();
  const served = useApi<Page<ModelVersion>>("/api/model-versions/?serving_status=serving&page_size=200");
  const tasks = useApi<RunnableTasks>(`/api/rollout-batches/tasks/?project=${project}`);
  const [form, setForm] = useState<BatchForm>(() => defaultBatchForm());
  const [problems, setProblems] = useState<Record<string, string>>({});
  const { error, busy, dismiss, run } = useSubmit();
  const versions = served.data?.results ?? [];
  // Version A is the first served one until another is chosen.
  const versionA = form.versionA || versions[0]?.name || "";
  const set = (change: Partial<BatchForm>) => {
    setForm((old) => ({ ...old, ...change }));
    setProblems((old) => withoutProblems(old, change));
  };
  const runnable = tasks.data ? tasks.data.runnable.length : null;
  const taskCount = form.taskMode === "all" ? (runnable ?? 0) : form.chosen.length;
  const samples = Number(form.samples);
  const total = Number.isInteger(samples) && samples > 0 ? taskCount * samples : null;
  const blocked = cannotStartBecause(served.data ? versions.length : 1, runnable, busy);
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    const result = batchRequest(Number(project), { ...form, versionA });
    if ("problems" in result) {
      dismiss();
      setProblems(result.problems);
      return;
    }
    setProblems({});
    void run(async () => {
      const batch = await api.post<RolloutBatch>("/api/rollout-batches/", result.body);
      navigate(paths.batch(batch.id));
    });
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-batch" noValidate>
      <h2 id="new-batch">New rollout batch</h2>
      <p className="meta">
        A model version runs the project&apos;s tasks by itself, k samples a task, on the desktops people are not using. Each
        trajectory is then validated: V=1 makes it SFT data, V=0 CT data.
      </p>
      <ErrorBanner error={error ?? served.error ?? tasks.error} onDismiss={dismiss} />
      <div className="form-row">
        <label className="field">
          Name (optional)
          <input value={form.name} onChange={(e) => set({ name: e.target.value })} maxLength={200} />
        </label>
        <label className="field">
          Model version A
          <select
            value={versionA}
            onChange={(e) => set({ versionA: e.target.value })}
            aria-invalid={problems.versionA ? true : undefined}
            aria-describedby={problems.versionA ? "version-a-problem" : undefined}
          >
            {versions.length === 0 ? <option value="">No served version</option> : null}
            {versions.map((v) => (
              <option key={v.id} value={v.name}>
                {v.name}
              </option>
            ))}
          </select>
          <Problem id="version-a-problem" text={problems.versionA} />
        </label>
        <label className="field">
          Version B (optional)
          <select
            value={form.versionB}
            onChange={(e) => set({ versionB: e.target.value })}
            aria-invalid={problems.versionB ? true : undefined}
            aria-describedby={problems.versionB ? "version-b-problem" : undefined}
          >
            <option value="">— none —</option>
            {versions
              .filter((v) => v.name !== versionA)
              .map((v) => (
                <option key={v.id} value={v.name}>
                  {v.name}
                </option>
              ))}
          </select>
          <Problem id="version-b-problem" text={problems.versionB} />
        </label>
        {form.versionB ? (
          <NumberField id="b-share" label="Share of samples for B (%)" value={form.bShare} onChange={(bShare) => set({ bShare })} problem={problems.bShare} />
        ) : null}
      </div>
      {served.data && versions.length === 0 ? (
        <p className="warn">Only served versions run rollouts, and none is served: serve one on its Model versions page first.</p>
      ) : null}
      <fieldset>
        <legend>Tasks</legend>
        {tasks.loading && !tasks.data ? <Loading /> : null}
        {tasks.data ? (
          <>
            <label>
              <input type="radio" name="task-mode" checked={form.taskMode === "all"} onChange={() => set({ taskMode: "all" })} /> All runnable
              tasks ({tasks.data.runnable.length})
            </label>
            <label>
              <input type="radio" name="task-mode" checked={form.taskMode === "some"} onChange={() => set({ taskMode: "some" })} /> Some of
              them, by id
            </label>
            {tasks.data.cannot_run > 0 ? (
              <p className="meta">
                {tasks.data.cannot_run} task{tasks.data.cannot_run === 1 ? "" : "s"} of the project cannot run here and {tasks.data.cannot_run === 1 ? "is" : "are"} left out
                (see Tasks).
              </p>
            ) : null}
            {form.taskMode === "some" ? (
              <TaskPicker tasks={tasks.data} chosen={form.chosen} onChange={(chosen) => set({ chosen })} problem={problems.tasks} />
            ) : null}
          </>
        ) : null}
      </fieldset>
      <div className="form-row">
        <NumberField id="samples" label={`Samples per task, k (1–${MAX_SAMPLES})`} value={form.samples} onChange={(s) => set({ samples: s })} problem={problems.samples} />
        <NumberField
          id="temperature"
          label="Temperature (0–2)"
          value={form.temperature}
          onChange={(temperature) => set({ temperature })}
          problem={problems.temperature}
          hint="the project's own"
          help="temperature-help"
        />
        <NumberField id="max-concurrent" label="Max concurrent rollouts" value={form.maxConcurrent} onChange={(maxConcurrent) => set({ maxConcurrent })} problem={problems.maxConcurrent} />
        <NumberField
          id="desktop-share"
          label="Desktop share (% of the pool)"
          value={form.desktopShare}
          onChange={(desktopShare) => set({ desktopShare })}
          problem={problems.desktopShare}
          help="desktop-share-help"
        />
        <p className="meta" data-testid="batch-size">
          {total === null ? "" : `${taskCount} task${taskCount === 1 ? "" : "s"} × ${samples} = ${total} rollout${total === 1 ? "" : "s"}`}
        </p>
      </div>
      <p className="meta" id="temperature-help">
        Empty: the project&apos;s model settings (0 unless they say otherwise). Above 0 the k samples of a task differ; at 0 they are alike.
      </p>
      <p className="meta" id="desktop-share-help">
        The batch holds at most this share of the desktops of the project&apos;s template (at least one), and never more than the
        concurrent limit: people keep the rest of the pool, so annotators never wait for a desktop because of a batch.
      </p>
      <fieldset>
        <legend>Stop rules: a rollout stops after…</legend>
        <div className="form-row">
          <NumberField id="invalid-in-row" label="Invalid outputs in a row" value={form.invalidInRow} onChange={(invalidInRow) => set({ invalidInRow })} problem={problems.invalidInRow} />
          <NumberField
            id="same-action"
            label="Same action repeats (a loop, 2 or more)"
            value={form.sameActionRepeats}
            onChange={(sameActionRepeats) => set({ sameActionRepeats })}
            problem={problems.sameActionRepeats}
          />
          <NumberField
            id="unchanged-steps"
            label="Steps in a row that left the screen unchanged"
            value={form.unchangedSteps}
            onChange={(unchangedSteps) => set({ unchangedSteps })}
            problem={problems.unchangedSteps}
          />
          <NumberField
            id="max-steps"
            label="Step limit"
            value={form.maxSteps}
            onChange={(maxSteps) => set({ maxSteps })}
            problem={problems.maxSteps}
            hint="the tasks' own"
          />
        </div>
        <p className="meta">
          Besides these, a rollout ends when the model answers finished() or call_user(). An empty step limit takes the smallest of the
          chosen tasks&apos; own.
        </p>
      </fieldset>
      <Button type="submit" variant="primary" disabled={blocked !== null} disabledReason={blocked ?? undefined}>
        Start rollout batch
      </Button>
    </form>
  );
}

function ValidationFields({
  project,
  settings,
  saved,
  onSaved,
  onEdit,
}: {
  project: string;
  settings: ValidationSettings;
  saved: boolean;
  onSaved: (s: ValidationSettings) => void;
  onEdit: () => void;
}) {
  const [form, setForm] = useState<ValidationForm>(() => validationForm(settings));
  const [problems, setProblems] = useState<Record<string, string>>({});
  const { error, busy, dismiss, run } = useSubmit();
  const set = (change: Partial<ValidationForm>) => {
    onEdit();
    setForm((old) => ({ ...old, ...change }));
    setProblems((old) => withoutProblems(old, change));
  };
  const keySet = settings.judge?.api_key_set ?? false;
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    const result = validationRequest(form);
    if ("problems" in result) {
      dismiss();
      setProblems(result.problems);
      return;
    }
    setProblems({});
    void run(async () => {
      onSaved(await api.put<ValidationSettings>(`/api/projects/${project}/validation/`, result.body));
    });
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="validation-heading" noValidate>
      <h2 id="validation-heading">Validation of rollouts</h2>
      <p className="meta">
        V=1 when every part passes: the rule checks (always), the task&apos;s evaluator where the task has one, the judge model when
        one is named here, and a reviewer&apos;s verdict when human review is on. One failed part makes V=0; a part not known yet
        leaves V unknown, and such a rollout is in no dataset.
      </p>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <fieldset>
        <legend>Judge model (optional: an OpenAI-compatible endpoint)</legend>
        <div className="form-row">
          <label className="field grow">
            Judge endpoint base URL
            <input
              type="url"
              value={form.judgeUrl}
              onChange={(e) => set({ judgeUrl: e.target.value })}
              placeholder="http://judge-host:8000/v1"
              aria-invalid={problems.judgeUrl ? true : undefined}
              aria-describedby={problems.judgeUrl ? "judge-url-problem" : undefined}
            />
            <Problem id="judge-url-problem" text={problems.judgeUrl} />
          </label>
          <label className="field">
            Judge model
            <input
              value={form.judgeModel}
              onChange={(e) => set({ judgeModel: e.target.value })}
              placeholder="qwen2.5-vl-72b"
              aria-invalid={problems.judgeModel ? true : undefined}
              aria-describedby={problems.judgeModel ? "judge-model-problem" : undefined}
            />
            <Problem id="judge-model-problem" text={problems.judgeModel} />
          </label>
          <NumberField id="judge-threshold" label="Pass threshold (0–1)" value={form.threshold} onChange={(threshold) => set({ threshold })} problem={problems.threshold} />
          <label className="field">
            Judge API key
            <input
              type="password"
              autoComplete="new-password"
              value={form.apiKey}
              onChange={(e) => set({ apiKey: e.target.value, clearKey: false })}
              placeholder={keySet ? "a new key replaces it" : "not set"}
              aria-describedby="judge-key-status"
            />
          </label>
          <p className="meta" id="judge-key-status" data-testid="judge-key-status">
            {keySet ? "A key is set; it is never shown." : "No key is set."}
          </p>
          {keySet ? (
            <label>
              <input type="checkbox" checked={form.clearKey} onChange={(e) => set({ clearKey: e.target.checked, apiKey: "" })} /> Remove the
              stored key
            </label>
          ) : null}
        </div>
        <p className="meta">Leave the endpoint and the model empty to ask no judge.</p>
      </fieldset>
      <div className="form-row">
        <NumberField
          id="min-task-success"
          label="Minimum task success (0–1)"
          value={form.minTaskSuccess}
          onChange={(minTaskSuccess) => set({ minTaskSuccess })}
          problem={problems.minTaskSuccess}
          help="min-success-help"
        />
        <label>
          <input type="checkbox" checked={form.humanReview} onChange={(e) => set({ humanReview: e.target.checked })} /> Human review: a
          reviewer&apos;s verdict is a part of V
        </label>
      </div>
      <p className="meta" id="min-success-help">
        The score the task&apos;s evaluator must give for its part to pass. With human review on, a rollout&apos;s V stays unknown until
        someone reviews its episode.
      </p>
      <Button type="submit" variant="primary" disabled={busy} disabledReason="Saving…">
        Save validation settings
      </Button>
      {saved ? (
        <span className="ok-banner" role="status" data-testid="validation-saved">
          Saved.
        </span>
      ) : null}
    </form>
  );
}

function ValidationSettingsForm({ project }: { project: string }) {
  const { data, error } = useApi<ValidationSettings>(`/api/projects/${project}/validation/`);
  const [stored, setStored] = useState<ValidationSettings | null>(null);
  const [saved, setSaved] = useState(false);
  const [saves, setSaves] = useState(0);
  const settings = stored ?? data;
  if (error) return <ErrorBanner error={error} />;
  if (!settings) return <Loading />;
  const onSaved = (answer: ValidationSettings) => {
    setStored(answer);
    setSaved(true);
    setSaves((n) => n + 1);
  };
  // Saving gives the stored settings (the key as "set"): the form starts again from them.
  return (
    <ValidationFields
      key={saves}
      project={project}
      settings={settings}
      saved={saved}
      onSaved={onSaved}
      onEdit={() => setSaved(false)}
    />
  );
}

/** The Rollouts page of one project (`project`), or of the project chosen on it. */
export function Rollouts({ project: fixed, paths }: { project?: string; paths: RolloutPaths }) {
  const me = useMe();
  const [params, setParams] = useSearchParams();
  const { projects, readable, project } = useReadableProjects(fixed ?? params.get("project") ?? "");
  const chosen = fixed ?? project;
  const runs = useMemo(() => (chosen ? mayRunRollouts(me, Number(chosen)) : false), [me, chosen]);
  return (
    <>
      {fixed ? null : (
        <div className="form-row">
          <ProjectSelect projects={readable} value={project} onChange={(p) => setParams({ project: p })} />
        </div>
      )}
      {fixed ? null : <ErrorBanner error={projects.error} />}
      {!fixed && projects.data && readable.length === 0 ? <p className="empty">You are not an engineer or manager of any project.</p> : null}
      {chosen ? (
        <>
          <BatchList project={chosen} paths={paths} />
          {runs ? <NewBatchForm key={chosen} project={chosen} paths={paths} /> : null}
          {runs ? <ValidationSettingsForm key={`v${chosen}`} project={chosen} /> : null}
        </>
      ) : null}
    </>
  );
}
