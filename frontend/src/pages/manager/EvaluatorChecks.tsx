/**
 * The evaluator self-check, for a project's managers: each task's evaluator is run right after its
 * setup on an untouched desktop. An evaluator that scores above 0 with no work done is flagged
 * ("passes without work") and its rollouts count in no dataset until a manager trusts it; one
 * that cannot run is flagged with the reason.
 */
import { useEffect } from "react";
import { api } from "../../api";
import { Button, ErrorBanner, useApi, useSubmit } from "../../ui";
import { counted } from "../../ui/format";
import type { EvaluatorCheckRow, EvaluatorChecks, EvaluatorCheckStatus } from "../../domain/api";

const POLL_MS = 3000;

const STATUS_WORDS: Record<EvaluatorCheckStatus, string> = {
  pending: "being checked",
  trusted: "score 0 with no work done",
  passes_without_work: "pass without work",
  cannot_evaluate: "cannot evaluate",
  failed: "could not be checked",
};

function summary(counts: EvaluatorChecks["counts"]): string {
  const parts = (Object.keys(STATUS_WORDS) as EvaluatorCheckStatus[])
    .filter((status) => counts[status])
    .map((status) => `${counts[status]} ${STATUS_WORDS[status]}`);
  return parts.length ? parts.join(", ") : "no evaluator to check";
}

function Flagged({ rows, what }: { rows: EvaluatorCheckRow[]; what: string }) {
  if (rows.length === 0) return null;
  return (
    <>
      <p>{what}</p>
      <ul>
        {rows.map((row) => (
          <li key={row.task}>
            <code>{row.external_id}</code>: {row.reason}
          </li>
        ))}
      </ul>
    </>
  );
}

/** In the import report: the imported tasks' checks, followed until none is pending. */
export function ImportChecks({ projectId, from }: { projectId: string; from: string }) {
  const since = encodeURIComponent(from);
  const checks = useApi<EvaluatorChecks>(`/api/projects/${projectId}/evaluator-checks/?requested_from=${since}`);
  const rows = checks.data?.checks ?? [];
  const pending = rows.some((row) => row.status === "pending");
  const { reload } = checks;
  useEffect(() => {
    if (!pending) return;
    const timer = window.setInterval(reload, POLL_MS);
    return () => window.clearInterval(timer);
  }, [pending, reload]);
  if (checks.data && rows.length === 0) return null;
  const counts: EvaluatorChecks["counts"] = {};
  rows.forEach((row) => (counts[row.status] = (counts[row.status] ?? 0) + 1));
  const flagged = rows.filter((row) => row.flagged || row.status === "failed");
  return (
    <div className={flagged.length ? "warn" : "meta"} role="status" data-testid="import-evaluator-checks">
      <p>
        Evaluator self-check of {counted(rows.length, "task")}: {summary(counts)}
        {pending ? " (runs in the background on a desktop)" : ""}.
      </p>
      <Flagged
        rows={rows.filter((r) => r.status === "passes_without_work" && r.flagged)}
        what="Passes without work: kept out of datasets until you trust it on the task list."
      />
      <Flagged rows={rows.filter((r) => r.status === "cannot_evaluate")} what="Cannot evaluate:" />
      <Flagged rows={rows.filter((r) => r.status === "failed")} what="Could not be checked:" />
      <ErrorBanner error={checks.error} />
    </div>
  );
}

/** A manager trusts an evaluator that passes without work (for the task as it is now). */
export function TrustEvaluator({ taskId, onDone }: { taskId: number; onDone: () => void }) {
  const { error, busy, dismiss, run } = useSubmit();
  return (
    <>
      <Button
        disabled={busy}
        disabledReason="Saving…"
        onClick={() =>
          void run(async () => {
            await api.post(`/api/tasks/${taskId}/evaluator-check/clear/`, {});
            onDone();
          })
        }
      >
        Trust evaluator
      </Button>
      <ErrorBanner error={error} onDismiss={dismiss} />
    </>
  );
}

/** Check the evaluators of the selected tasks again (after a task file's files were uploaded). */
export function CheckEvaluators({
  projectId,
  taskIds,
  onQueued,
}: {
  projectId: string;
  taskIds: number[];
  onQueued: (message: string) => void;
}) {
  const { error, busy, dismiss, run } = useSubmit();
  return (
    <>
      <Button
        disabled={taskIds.length === 0 || busy}
        disabledReason={busy ? "Queueing…" : "Select tasks in the table first."}
        onClick={() =>
          void run(async () => {
            const done = await api.post<{ counts: EvaluatorChecks["counts"] }>(
              `/api/projects/${projectId}/evaluator-checks/`,
              { task_ids: taskIds },
            );
            onQueued(`Evaluator self-check: ${summary(done.counts)}.`);
          })
        }
      >
        Check evaluators
      </Button>
      <ErrorBanner error={error} onDismiss={dismiss} />
    </>
  );
}
