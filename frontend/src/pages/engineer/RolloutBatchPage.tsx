/**
 * One rollout batch: status and progress, pause, resume and cancel (for those who run
 * rollouts), its settings, pass@k, success overall, by task and by model version, the
 * validation's verdicts by part, why rollouts stopped, what it cost, and its rollouts with a
 * link to each one's episode. Read again every few seconds while the batch still changes.
 */
import { useEffect, useRef, useState } from "react";
import { Link, useParams } from "react-router-dom";
import { api, type Page } from "../../api";
import { Button, ErrorBanner, Loading, Pager, Table, useApi, useMe, usePoll, useSubmit } from "../../ui";
import { percent, when } from "../../ui/format";
import { score } from "../../episode/evaluation";
import { BatchStatusBadge } from "./Rollouts";
import {
  PART_LABEL,
  batchLive,
  mayRunRollouts,
  partRows,
  progressText,
  sizeText,
  solvedTasks,
  steering,
  stopReasonText,
  verdictText,
  versionsText,
  type BatchDetail,
  type GroupFigures,
  type Rollout,
  type RolloutPaths,
} from "./rollouts";

function rate(group: GroupFigures): string {
  return `${percent(group.success_rate)} (${group.passed} of ${group.validated} whose V is known)`;
}

function Steering({ batch, onChange }: { batch: BatchDetail; onChange: () => void }) {
  const { error, busy, dismiss, run } = useSubmit();
  const [confirming, setConfirming] = useState(false);
  const why = steering(batch.status);
  const steer = (to: "pause" | "resume" | "cancel") =>
    run(async () => {
      await api.post(`/api/rollout-batches/${batch.id}/${to}/`);
      setConfirming(false);
      onChange();
    });
  const left = (batch.counts.queued ?? 0) + (batch.counts.running ?? 0);
  return (
    <div className="form-row steering" data-testid="steering">
      <ErrorBanner error={error} onDismiss={dismiss} />
      <Button onClick={() => steer("pause")} disabled={busy || why.pause !== null} disabledReason={why.pause ?? "Working…"}>
        Pause
      </Button>
      <Button onClick={() => steer("resume")} disabled={busy || why.resume !== null} disabledReason={why.resume ?? "Working…"}>
        Resume
      </Button>
      {confirming ? (
        <span className="confirm" role="group" aria-label="Confirm cancelling">
          Cancel the batch? Its {left} queued or running rollout{left === 1 ? "" : "s"} will not finish.{" "}
          <Button variant="danger" onClick={() => steer("cancel")} disabled={busy} disabledReason="Cancelling…">
            Yes, cancel the batch
          </Button>{" "}
          <Button onClick={() => setConfirming(false)}>Keep it</Button>
        </span>
      ) : (
        <Button variant="danger" onClick={() => setConfirming(true)} disabled={why.cancel !== null} disabledReason={why.cancel ?? undefined}>
          Cancel batch
        </Button>
      )}
      <p className="meta">Paused: no new rollout starts and running ones finish. Cancelled: running ones stop at their next step.</p>
    </div>
  );
}

function Settings({ batch }: { batch: BatchDetail }) {
  const rules = batch.stop_rules;
  const sampling = Object.entries(batch.sampling);
  return (
    <dl className="kv kv-wide" data-testid="batch-settings">
      <dt>Versions</dt>
      <dd>{versionsText(batch)}</dd>
      <dt>Size</dt>
      <dd>{sizeText(batch)}</dd>
      <dt>Sampling</dt>
      <dd>{sampling.length ? sampling.map(([k, v]) => `${k} ${v}`).join(", ") : "the project's own"}</dd>
      <dt>Stop rules</dt>
      <dd>
        {rules.invalid_in_row} invalid outputs in a row · the same action {rules.same_action_repeats} times (loop) · {rules.unchanged_steps}{" "}
        unchanged steps · at most {rules.max_steps} steps
      </dd>
      <dt>Desktops</dt>
      <dd>
        at most {batch.max_concurrent} at once, and at most {Math.round(batch.desktop_share * 100)}% of the pool
      </dd>
      <dt>Started by</dt>
      <dd>
        {batch.created_by} on {when(batch.created_at)}
        {batch.started_at ? ` · running since ${when(batch.started_at)}` : ""}
        {batch.finished_at ? ` · ended ${when(batch.finished_at)}` : ""}
      </dd>
    </dl>
  );
}

function Figures({ batch }: { batch: BatchDetail }) {
  const { solved, tasks } = solvedTasks(batch);
  const stops = Object.entries(batch.stop_reasons).sort((a, b) => b[1] - a[1]);
  return (
    <>
      <section className="card" aria-labelledby="success-heading">
        <h2 id="success-heading">Success</h2>
        <dl className="kv kv-wide figures">
          <dt>pass@{batch.k}</dt>
          <dd data-testid="pass-at-k">
            {percent(batch.pass_at_k)} ({solved} of {tasks} task{tasks === 1 ? "" : "s"} with a sample at V=1)
          </dd>
          <dt>Success rate (V=1)</dt>
          <dd data-testid="success-rate">{rate(batch.success)}</dd>
          <dt>Mean task success</dt>
          <dd data-testid="task-success-mean">{score(batch.success.task_success)}</dd>
        </dl>
        <div className="compare">
          <div data-testid="by-task">
            <Table
              caption="By task"
              rows={batch.by_task}
              rowKey={(t) => t.task}
              empty="No rollout yet."
              columns={[
                { header: "Task", cell: (t) => <code>{t.task}</code> },
                { header: "Rollouts", cell: (t) => t.rollouts },
                { header: "V=1 of V known", cell: (t) => `${t.passed} of ${t.validated}` },
                { header: "Success rate", cell: (t) => percent(t.success_rate) },
                { header: "Task success", cell: (t) => score(t.task_success) },
              ]}
            />
          </div>
          <div data-testid="by-version">
            <Table
              caption="By model version"
              rows={batch.by_version}
              rowKey={(v) => v.model_version}
              empty="No rollout has started yet."
              columns={[
                { header: "Version", cell: (v) => v.model_version || "—" },
                { header: "Rollouts", cell: (v) => v.rollouts },
                { header: "V=1 of V known", cell: (v) => `${v.passed} of ${v.validated}` },
                { header: "Success rate", cell: (v) => percent(v.success_rate) },
                { header: "Task success", cell: (v) => score(v.task_success) },
              ]}
            />
          </div>
        </div>
      </section>
      <section className="card" aria-labelledby="validation-heading">
        <h2 id="validation-heading">Validation and stops</h2>
        <div className="compare">
          <div data-testid="verdicts-by-part">
            <Table
              caption="Verdicts by part"
              rows={partRows(batch.verdicts)}
              rowKey={(p) => p.name}
              empty="No rollout is validated yet."
              columns={[
                { header: "Part", cell: (p) => PART_LABEL[p.name] ?? p.name },
                { header: "Passed", cell: (p) => p.passed },
                { header: "Failed", cell: (p) => p.failed },
                { header: "Not known", cell: (p) => p.unknown },
              ]}
            />
          </div>
          <div>
            <Table
              caption="Why rollouts stopped"
              rows={stops}
              rowKey={([reason]) => reason}
              empty="No rollout has stopped yet."
              columns={[
                { header: "Stop reason", cell: ([reason]) => stopReasonText(reason) },
                { header: "Rollouts", cell: ([reason, n]) => <span data-testid={`stop-${reason}`}>{n}</span> },
              ]}
            />
          </div>
        </div>
        <p data-testid="cost">
          Cost: {batch.cost.steps} step{batch.cost.steps === 1 ? "" : "s"}, {batch.cost.tokens.toLocaleString("en")} tokens
          {batch.cost.tokens_per_rollout !== null ? ` (${Math.round(batch.cost.tokens_per_rollout).toLocaleString("en")} per ended rollout)` : ""}.
        </p>
      </section>
    </>
  );
}

function RolloutTable({ batch, paths }: { batch: BatchDetail; paths: RolloutPaths }) {
  const [page, setPage] = useState(1);
  const list = useApi<Page<Rollout>>(`/api/rollouts/?batch=${batch.id}&page=${page}&page_size=100`);
  const { reload } = list;
  usePoll(reload, batchLive(batch), 3000);
  // Steering changes the rollouts too (a cancel cancels the queued ones): read them again
  // whenever the batch's counts change, even once it has ended.
  const counts = `${batch.status} ${JSON.stringify(batch.counts)}`;
  const shown = useRef(counts);
  useEffect(() => {
    if (shown.current === counts) return;
    shown.current = counts;
    reload();
  }, [counts, reload]);
  return (
    <section className="card" aria-labelledby="rollouts-heading">
      <h2 id="rollouts-heading">Rollouts {list.data ? `(${list.data.count})` : null}</h2>
      <ErrorBanner error={list.error} />
      {list.loading && !list.data ? <Loading /> : null}
      {list.data ? (
        <div data-testid="rollouts-table">
          <Table
            rows={list.data.results}
            rowKey={(r) => r.id}
            empty="This batch has no rollouts."
            columns={[
              { header: "Task", cell: (r) => <code>{r.task}</code> },
              { header: "Sample", cell: (r) => r.sample + 1 },
              { header: "Version", cell: (r) => r.model_version || "—" },
              { header: "Status", cell: (r) => r.status },
              { header: "Stop reason", cell: (r) => stopReasonText(r.stop_reason) },
              { header: "Outcome", cell: (r) => r.outcome || "—" },
              { header: "Task success", cell: (r) => score(r.task_success) },
              {
                header: "V",
                cell: (r) =>
                  verdictText(r) === "—" ? (
                    "—"
                  ) : (
                    <span className={`badge badge-v-${r.verdict === null ? "unknown" : r.verdict ? "pass" : "fail"}`} data-testid={`v-${r.id}`}>
                      {verdictText(r)}
                    </span>
                  ),
              },
              { header: "Steps", cell: (r) => r.steps },
              { header: "Episode", cell: (r) => (r.episode ? <Link to={paths.episode(r.episode)}>Episode {r.episode}</Link> : "—") },
            ]}
          />
          <Pager page={page} data={list.data} onChange={setPage} />
        </div>
      ) : null}
    </section>
  );
}

export function RolloutBatchPage({ paths }: { paths: RolloutPaths }) {
  const { batchId = "" } = useParams();
  const me = useMe();
  const { data: batch, error, reload } = useApi<BatchDetail>(`/api/rollout-batches/${batchId}/`);
  usePoll(reload, batch ? batchLive(batch) : false, 3000);
  if (error) return <ErrorBanner error={error} />;
  if (!batch) return <Loading />;
  return (
    <article aria-labelledby="batch-heading">
      <p>
        <Link to={paths.list(batch.project)}>← Rollout batches</Link>
      </p>
      <h2 id="batch-heading">
        Rollout batch #{batch.id}
        {batch.name ? `: ${batch.name}` : ""}
      </h2>
      <section className="card" aria-label="Status">
        <p data-testid="batch-status">
          <BatchStatusBadge batch={batch} /> <span className="meta">{progressText(batch.counts)}</span>
        </p>
        {mayRunRollouts(me, batch.project) ? <Steering batch={batch} onChange={reload} /> : null}
        <Settings batch={batch} />
      </section>
      <Figures batch={batch} />
      <RolloutTable batch={batch} paths={paths} />
    </article>
  );
}
