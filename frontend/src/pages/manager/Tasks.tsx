/**
 * A project's tasks: import a task file (every bad row is listed when the server refuses it),
 * and select tasks to assign to one of the project's annotators or to send back to the pool, or
 * to check their evaluators again; an evaluator that passes without work is trusted here.
 */
import { useRef, useState } from "react";
import { api, ApiError, type Page } from "../../api";
import { Button, ErrorBanner, Loading, Pager, toggled, useApi, useSubmit } from "../../ui";
import { STATUS_LABEL, counted, when } from "../../ui/format";
import { TaskSupportBadges } from "./TaskSupportBadges";
import { CheckEvaluators, ImportChecks, TrustEvaluator } from "./EvaluatorChecks";
import type { ImportReport, MembershipRow, Task } from "../../domain/api";

/** What assigning did: the runnable tasks moved; those that cannot run here stayed, named. */
interface AssignResult {
  assigned: number;
  assignee: string;
  cannot_run?: { id: string; reason: string }[];
  message?: string;
}

/** What unassigning did: assigned tasks went back to the pool, the others were left as they
 * were (in the pool already, or started); `message` says so in words. */
interface UnassignResult {
  unassigned: number;
  not_assigned: number;
  started: number;
  message: string;
}

interface RowError {
  row: number;
  field: string;
  message: string;
}

function ImportAdvice({ projectId, report }: { projectId: string; report: ImportReport }) {
  const [switched, setSwitched] = useState<string | null>(null);
  const { error, busy, dismiss, run } = useSubmit();
  const onDesktop = report.not_on_desktop_tasks ?? [];
  const notScored = report.not_scored_tasks ?? [];
  const suggested = report.suggested_template ?? null;
  const useSuggested = () =>
    void run(async () => {
      await api.patch(`/api/projects/${projectId}/`, { environment_template: suggested });
      setSwitched(suggested);
    });
  return (
    <>
      {onDesktop.length > 0 || suggested ? (
        <div className="warn" role="note" data-testid="import-desktop">
          {onDesktop.length > 0 ? (
            <>
              <p>
                {counted(onDesktop.length, "task")} start{onDesktop.length === 1 ? "s" : ""} programs this project&apos;s
                desktop does not have:
              </p>
              <ul>
                {onDesktop.map((t) => (
                  <li key={t.id}>
                    <code>{t.id}</code>: {t.programs.join(", ")}
                  </li>
                ))}
              </ul>
            </>
          ) : (
            <p>These are OSWorld tasks, and this project runs on a local desktop.</p>
          )}
          <ErrorBanner error={error} onDismiss={dismiss} />
          {switched ? (
            <p data-testid="desktop-switched">This project now runs its tasks on the {switched} desktop.</p>
          ) : suggested ? (
            <Button onClick={useSuggested} disabled={busy} disabledReason="Switching…">
              Run this project&apos;s tasks on the {suggested} desktop
            </Button>
          ) : (
            <p>Choose a desktop that has them under Members and desktop.</p>
          )}
        </div>
      ) : null}
      {notScored.length > 0 ? (
        <div className="warn" role="note" data-testid="import-not-scored">
          <p>
            {counted(notScored.length, "task")} will not be scored here (their evaluator uses a getter or a metric Tandem does
            not support): they run, and end unscored.
          </p>
          <ul>
            {notScored.map((t) => (
              <li key={t.id}>
                <code>{t.id}</code>: {t.reason}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </>
  );
}

function ImportForm({ projectId, onImported }: { projectId: string; onImported: () => void }) {
  const file = useRef<HTMLInputElement>(null);
  const [report, setReport] = useState<ImportReport | null>(null);
  const { error, busy, dismiss, run } = useSubmit();
  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    const chosen = file.current?.files?.[0];
    if (!chosen) return;
    const form = new FormData();
    form.append("file", chosen);
    setReport(null);
    void run(async () => {
      setReport(await api.post<ImportReport>(`/api/projects/${projectId}/import/`, form));
      onImported();
    });
  };
  const details = error instanceof ApiError ? (error.details as { errors?: RowError[]; bad_row_count?: number } | null) : null;
  const rowErrors = details?.errors ?? null;
  // A row can have several problems: the count is of rows, the table lists each problem.
  const badRows = details?.bad_row_count ?? new Set(rowErrors?.map((e) => e.row)).size;
  return (
    <form className="card" onSubmit={submit} aria-labelledby="import-heading">
      <h2 id="import-heading">Import tasks</h2>
      <p className="meta">
        A .json or .jsonl file: an array of tasks, one task, or OSWorld task files as they are. A file is imported whole
        or not at all.
      </p>
      <div className="form-row">
        <label className="field">
          Task file
          <input ref={file} type="file" name="file" accept=".json,.jsonl,application/json" required />
        </label>
        <Button type="submit" variant="primary" disabled={busy} disabledReason="Importing…">
          Import
        </Button>
      </div>
      {report ? (
        <div className="ok-banner" role="status" data-testid="import-report">
          <p>
            Imported {counted(report.rows, "task")}: {report.created} created, {report.updated} updated, {report.unchanged} unchanged.
          </p>
          {report.cannot_run > 0 ? (
            <>
              <p>
                {report.cannot_run} task{report.cannot_run === 1 ? " cannot" : "s cannot"} run here: kept, but never
                claimed nor assigned.
              </p>
              <ul data-testid="import-cannot-run">
                {report.cannot_run_tasks.map((t) => (
                  <li key={t.id}>
                    <code>{t.id}</code>: {t.reason}
                  </li>
                ))}
              </ul>
            </>
          ) : null}
        </div>
      ) : null}
      {report ? <ImportAdvice projectId={projectId} report={report} /> : null}
      {report?.evaluator_checks_from ? <ImportChecks projectId={projectId} from={report.evaluator_checks_from} /> : null}
      {error && !rowErrors ? <ErrorBanner error={error} onDismiss={dismiss} /> : null}
      {rowErrors ? (
        <div role="alert" className="error-banner" data-testid="import-errors">
          <strong>{(error as ApiError).message}</strong>
          <table className="table row-errors">
            <caption>
              {badRows} bad row{badRows === 1 ? "" : "s"}, {rowErrors.length} problem{rowErrors.length === 1 ? "" : "s"}
            </caption>
            <thead>
              <tr>
                <th scope="col">Row</th>
                <th scope="col">Field</th>
                <th scope="col">Problem</th>
              </tr>
            </thead>
            <tbody>
              {rowErrors.map((e, i) => (
                <tr key={i}>
                  <td>{e.row}</td>
                  <td>
                    <code>{e.field}</code>
                  </td>
                  <td>{e.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </form>
  );
}

export function TaskManager({ projectId }: { projectId: string }) {
  const [status, setStatus] = useState("");
  const [search, setSearch] = useState("");
  const [page, setPage] = useState(1);
  const query = `/api/tasks/?project=${projectId}&page=${page}&page_size=50${status ? `&status=${status}` : ""}${
    search ? `&search=${encodeURIComponent(search)}` : ""
  }`;
  const tasks = useApi<Page<Task>>(query);
  const members = useApi<Page<MembershipRow>>(`/api/memberships/?project=${projectId}&role=annotator&page_size=500`);
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [assignee, setAssignee] = useState("");
  const [message, setMessage] = useState<string | null>(null);
  const action = useSubmit();
  const rows = tasks.data?.results ?? [];
  const toggle = (id: number) => setSelected((old) => toggled(old, id));
  const runnable = rows.filter((t) => !t.cannot_run);
  const allOnPage = runnable.length > 0 && runnable.every((t) => selected.has(t.id));
  const run = (what: "assign" | "unassign") => {
    setMessage(null);
    void action.run(async () => {
      const task_ids = [...selected];
      if (what === "assign") {
        const result = await api.post<AssignResult>(`/api/projects/${projectId}/assign/`, { task_ids, assignee });
        const left = result.cannot_run?.length
          ? ` ${counted(result.cannot_run.length, "task")} cannot run here and stayed unassigned: ${result.cannot_run
              .map((t) => `${t.id} (${t.reason})`)
              .join("; ")}.`
          : "";
        setMessage(`${counted(result.assigned, "task")} assigned to ${result.assignee}.${left}`);
      } else {
        setMessage((await api.post<UnassignResult>(`/api/projects/${projectId}/unassign/`, { task_ids })).message);
      }
      setSelected(new Set());
      tasks.reload();
    });
  };
  return (
    <>
      <ImportForm projectId={projectId} onImported={tasks.reload} />
      <section className="card" aria-labelledby="tasks-heading">
        <h2 id="tasks-heading">Tasks {tasks.data ? `(${tasks.data.count})` : null}</h2>
        <div className="form-row">
          <label className="field">
            Status
            <select
              value={status}
              onChange={(e) => {
                setStatus(e.target.value);
                setPage(1);
              }}
            >
              <option value="">All</option>
              {Object.entries(STATUS_LABEL).map(([value, label]) => (
                <option key={value} value={value}>
                  {label}
                </option>
              ))}
            </select>
          </label>
          <label className="field">
            Search
            <input
              type="search"
              value={search}
              onChange={(e) => {
                setSearch(e.target.value);
                setPage(1);
              }}
            />
          </label>
          <span className="grow" />
          <label className="field">
            Annotator
            <select value={assignee} onChange={(e) => setAssignee(e.target.value)}>
              <option value="">
                {members.data && members.data.results.length === 0
                  ? "No annotator in this project: add one under Members"
                  : "Choose an annotator…"}
              </option>
              {(members.data?.results ?? []).map((m) => (
                <option key={m.id} value={m.username}>
                  {m.username}
                </option>
              ))}
            </select>
          </label>
          <Button
            variant="primary"
            disabled={selected.size === 0 || !assignee}
            disabledReason={selected.size === 0 ? "Select tasks in the table first." : "Choose whom to assign them to."}
            onClick={() => run("assign")}
          >
            Assign {selected.size || ""} selected
          </Button>
          <Button disabled={selected.size === 0} disabledReason="Select tasks in the table first." onClick={() => run("unassign")}>
            Unassign selected
          </Button>
          <CheckEvaluators
            projectId={projectId}
            taskIds={[...selected]}
            onQueued={(text) => {
              setMessage(text);
              tasks.reload();
            }}
          />
        </div>
        {message ? (
          <p className="ok-banner" role="status" data-testid="assign-result">
            {message}
          </p>
        ) : null}
        <ErrorBanner error={action.error ?? tasks.error ?? members.error} onDismiss={action.dismiss} />
        {tasks.loading && !tasks.data ? <Loading /> : null}
        {rows.length === 0 && tasks.data ? <p className="empty">No tasks match.</p> : null}
        {rows.length > 0 ? (
          <table className="table" data-testid="task-table">
            <thead>
              <tr>
                <th scope="col" className="select-cell">
                  <input
                    type="checkbox"
                    aria-label="Select every task on this page"
                    checked={allOnPage}
                    onChange={() =>
                      setSelected((old) => {
                        const next = new Set(old);
                        rows.filter((t) => !t.cannot_run).forEach((t) => (allOnPage ? next.delete(t.id) : next.add(t.id)));
                        return next;
                      })
                    }
                  />
                </th>
                <th scope="col">Task</th>
                <th scope="col">Instruction</th>
                <th scope="col">Status</th>
                <th scope="col">Assignee</th>
                <th scope="col">Priority</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((t) => (
                <tr key={t.id}>
                  <td className="select-cell">
                    <input
                      type="checkbox"
                      aria-label={`Select task ${t.external_id}`}
                      checked={selected.has(t.id)}
                      disabled={Boolean(t.cannot_run)}
                      title={t.cannot_run ? `Cannot run here: ${t.cannot_run}` : undefined}
                      onChange={() => toggle(t.id)}
                    />
                  </td>
                  <td>{t.external_id}</td>
                  <td>
                    {t.instruction}
                    <TaskSupportBadges task={t} />
                    {t.evaluator_check?.status === "passes_without_work" && t.evaluator_check.flagged ? (
                      <TrustEvaluator taskId={t.id} onDone={tasks.reload} />
                    ) : null}
                  </td>
                  <td>{STATUS_LABEL[t.status]}</td>
                  <td>{t.assignee ?? "—"}</td>
                  <td>{t.priority}</td>
                  <td>{when(t.updated_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
        <Pager page={page} data={tasks.data} onChange={setPage} />
      </section>
    </>
  );
}
