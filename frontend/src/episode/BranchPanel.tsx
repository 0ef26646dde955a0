/**
 * From a rollout's first wrong step (reflection tuning on online traces): a reviewer marks the
 * step where the rollout first went wrong and sends it to annotators. The server rejects the
 * rollout with that step (the steps before it stay usable) and makes a branch task: its desktop
 * replays the steps before it, and an annotator corrects the step, or keeps the error and
 * reflects on it. The panel lists the branch tasks made so far; a branch task's own episode says
 * where it comes from and how closely its replay matched.
 */
import { useState } from "react";
import { Link } from "react-router-dom";
import { api } from "../api";
import { Button, ErrorBanner, useSubmit } from "../ui";
import { pixelShare, replaySummary } from "./branch";
import type { BranchTask, Episode } from "../domain/api";

/** For a rollout (an ended autonomous episode): mark a first wrong step and send it on. */
export function SendToAnnotators({
  episode,
  selected,
  reviews,
  onDone,
}: {
  episode: Episode;
  selected: number;
  reviews: boolean;
  onDone: () => void;
}) {
  const [comment, setComment] = useState("");
  const { error, busy, dismiss, onSubmit } = useSubmit();
  const [sent, setSent] = useState<string | null>(null);
  const runnable = episode.steps.filter((s) => s.index <= firstUndecided(episode));
  const step = runnable.some((s) => s.index === selected) ? selected : null;
  const submit = onSubmit(async () => {
    if (step === null) return;
    const task = await api.post<BranchTask>(`/api/episodes/${episode.id}/branch/`, { step, comment });
    setSent(`Step ${step} is marked as the first wrong one; branch task ${task.external_id} is ${task.status.replace("_", " ")}.`);
    onDone();
  });
  const why =
    episode.ended_at === null
      ? "The rollout is still running."
      : step === null
        ? "The steps before the one shown did not all run: choose an earlier step."
        : busy
          ? "Sending…"
          : undefined;
  return (
    <section className="card branch-panel" aria-labelledby="branch-heading" data-testid="branch-panel">
      <h2 id="branch-heading">Send to annotators</h2>
      <p className="meta">
        Mark the step shown as the first one the model got wrong. The rollout is rejected with that step (the steps before it stay
        usable as data) and goes to annotators as a branch task: a fresh desktop replays the steps before it, and an annotator
        corrects the step, or keeps the error and reflects on it.
      </p>
      {reviews ? (
        <form onSubmit={submit} aria-label="Send to annotators">
          <ErrorBanner error={error} onDismiss={dismiss} />
          <label className="field">
            Comment (optional)
            <textarea value={comment} onChange={(e) => setComment(e.target.value)} rows={2} />
          </label>
          <Button type="submit" variant="danger" disabled={why !== undefined} disabledReason={why}>
            {step === null ? "Mark first wrong step" : `Mark step ${step} first wrong & send to annotators`}
          </Button>
          {sent ? (
            <p role="status" className="ok">
              {sent}
            </p>
          ) : null}
        </form>
      ) : (
        <p className="empty">Reviewers, managers and admins of the project mark first wrong steps.</p>
      )}
      <BranchList branches={episode.branches ?? []} />
    </section>
  );
}

function firstUndecided(episode: Episode): number {
  const open = episode.steps.find((s) => !s.decision);
  return open ? open.index : Number.POSITIVE_INFINITY;
}

function BranchList({ branches }: { branches: BranchTask[] }) {
  if (!branches.length) return <p className="empty">No branch task was made from this rollout yet.</p>;
  return (
    <table className="table">
      <caption>Branch tasks from this rollout</caption>
      <thead>
        <tr>
          <th scope="col">From step</th>
          <th scope="col">Task</th>
          <th scope="col">Status</th>
          <th scope="col">Episodes</th>
        </tr>
      </thead>
      <tbody>
        {branches.map((b) => (
          <tr key={b.id}>
            <td>{b.branch_step}</td>
            <td>
              <code>{b.external_id}</code>
            </td>
            <td>
              {b.cannot_run ? `cannot run: ${b.cannot_run}` : b.status.replace("_", " ")}
              {b.assignee ? ` (${b.assignee})` : ""}
            </td>
            <td>
              {b.episodes.length
                ? b.episodes.map((e, i) => (
                    <span key={e.id}>
                      {i ? ", " : ""}
                      <Link to={`../${e.id}`} relative="path">
                        #{e.id}
                      </Link>{" "}
                      {e.outcome || "running"} by {e.annotator}
                    </span>
                  ))
                : "not started"}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** For a branch task's episode: the rollout it goes on from, and how its replay matched. */
export function BranchOrigin({ episode }: { episode: Episode }) {
  if (episode.branch_of === null || episode.branch_of === undefined || episode.branch_step === null) return null;
  const branch = { episode: episode.branch_of, step: episode.branch_step ?? 1, replay: episode.replay ?? {} };
  const after = episode.replay?.after_kept_error;
  return (
    <section className="card branch-origin" aria-label="Branch of a rollout" data-testid="branch-origin">
      <p>
        A branch task: it goes on from step {branch.step} of rollout{" "}
        <Link to={`../${episode.branch_of}`} relative="path">
          episode {episode.branch_of}
        </Link>
        , which a reviewer marked as its first wrong step. {replaySummary(branch)}
      </p>
      {after ? (
        <p className="meta">
          After the kept error, the screen at step {after.step} {after.offered ? "matched" : "did not match"} the rollout&apos;s (
          {pixelShare(after.difference)} of its pixels differed):{" "}
          {after.offered ? "the rollout's own next step was offered there." : "the model was asked again there."}
        </p>
      ) : null}
    </section>
  );
}
