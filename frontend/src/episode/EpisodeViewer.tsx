/**
 * The episode viewer: replays an episode step by step — the screenshot the annotator saw, the
 * model's proposal and the final step drawn on it, both as thought and action — with who
 * decided, when and how long they took, reviewers' revisions, and the review form. Kept errors
 * and the reflection steps after them are marked. A rollout (an autonomous episode) has its
 * panel: why it stopped and its validation, part by part; its review is the human part. Managers
 * and reviewers of the project reach it, and engineers the rollouts; the review form is offered
 * to those who review the project, and the server decides again.
 */
import { useEffect, useLayoutEffect, useState } from "react";
import { Link, useParams } from "react-router-dom";
import { api, roleIn } from "../api";
import { Button, ErrorBanner, Loading, useApi, useMe, usePoll, useSubmit } from "../ui";
import { GoldPanel } from "./GoldPanel";
import { EvaluationPanel } from "./Evaluation";
import { replayCheckText } from "./evaluation";
import { DECISION_LABEL, seconds, when } from "../ui/format";
import { LiveView } from "./LiveView";
import { stepBadge, undecidedNote } from "./liveStep";
import { proposalOf } from "./proposal";
import { reflectionNote, reflectsOn } from "./reflection";
import { BranchOrigin, SendToAnnotators } from "./BranchPanel";
import { RolloutPanel } from "./RolloutPanel";
import type { Episode, Review, Step } from "../domain/api";
import type { Action, Proposal } from "../domain/actions";
import "../pages/manager/manager.css";

const PROPOSAL_COLOUR = "#b35900";
const FINAL_COLOUR = "#1f4fb8";

function Marker({
  action,
  colour,
  label,
  size,
  below,
}: {
  action: Action | null;
  colour: string;
  label: string;
  size: number;
  below?: boolean;
}) {
  if (!action?.point) return null;
  const [x, y] = action.point;
  const r = Math.max(10, size / 80);
  // The proposal's label sits above its point and the final one's below, so both stay
  // readable when the annotator accepted the very point the model proposed.
  const labelY = below ? y + r * 2.6 : y - r * 1.2;
  return (
    <g data-testid={`marker-${label.toLowerCase()}`}>
      {action.end ? (
        <line x1={x} y1={y} x2={action.end[0]} y2={action.end[1]} stroke={colour} strokeWidth={r / 3} strokeDasharray={`${r} ${r / 2}`} />
      ) : null}
      <circle cx={x} cy={y} r={r} fill="none" stroke="#fff" strokeWidth={r / 2.2} />
      <circle cx={x} cy={y} r={r} fill="none" stroke={colour} strokeWidth={r / 4} />
      <line x1={x - r * 1.6} y1={y} x2={x + r * 1.6} y2={y} stroke={colour} strokeWidth={r / 5} />
      <line x1={x} y1={y - r * 1.6} x2={x} y2={y + r * 1.6} stroke={colour} strokeWidth={r / 5} />
      <text x={x + r * 1.4} y={labelY} fontSize={r * 1.5} fontWeight="bold" fill={colour} stroke="#fff" strokeWidth={r / 6} paintOrder="stroke">
        {label}
      </text>
    </g>
  );
}

function Screenshot({ step, proposal }: { step: Step; proposal: Proposal | null }) {
  const [w, h] = step.screen_size;
  return (
    <figure className="shot">
      <div className="shot-frame" style={{ aspectRatio: `${w} / ${h}` }}>
        <img
          src={`/api/screenshots/${step.screenshot}/`}
          alt={`Screen before step ${step.index}`}
          width={w}
          height={h}
        />
        <svg viewBox={`0 0 ${w} ${h}`} aria-hidden="true">
          <Marker action={proposal?.action ?? null} colour={PROPOSAL_COLOUR} label="Proposal" size={w} />
          <Marker action={step.final_action} colour={FINAL_COLOUR} label="Final" size={w} below />
        </svg>
      </div>
      <figcaption>
        <span className="swatch" style={{ background: PROPOSAL_COLOUR }} /> model&apos;s proposal{" "}
        <span className="swatch" style={{ background: FINAL_COLOUR }} /> final action (executed) — screen {w}×{h}
      </figcaption>
    </figure>
  );
}

function ActionBlock({ label, thought, text, json }: { label: string; thought: string; text: string | null; json: unknown }) {
  return (
    <dl className="kv">
      <dt>Thought</dt>
      <dd>{thought || <em>none</em>}</dd>
      <dt>Action</dt>
      <dd>
        <code data-testid={`${label}-action-text`}>{text ?? "—"}</code>
      </dd>
      <dt>As JSON</dt>
      <dd>
        <pre className="json">{json ? JSON.stringify(json) : "—"}</pre>
      </dd>
    </dl>
  );
}

function StepDetail({ step, episode }: { step: Step; episode: Episode }) {
  const proposal = proposalOf(step);
  const reflection = reflectionNote(episode.steps, step);
  return (
    <div className="step-detail">
      {reflection ? (
        <p className="step-reflection" data-testid="reflection-note">
          {reflection}
        </p>
      ) : null}
      <Screenshot step={step} proposal={proposal} />
      <div className="compare">
        <section aria-labelledby={`proposal-${step.index}`} className="card">
          <h3 id={`proposal-${step.index}`}>
            <span className="swatch" style={{ background: PROPOSAL_COLOUR }} /> Model&apos;s proposal
          </h3>
          {proposal === null ? (
            <p className="empty">The model proposed nothing for this step.</p>
          ) : proposal.invalid_reason ? (
            <p className="warn">Invalid: {proposal.invalid_reason}</p>
          ) : (
            <ActionBlock label="proposal" thought={proposal.thought} text={proposal.action_text ?? null} json={proposal.action} />
          )}
          {proposal ? (
            <p className="meta">
              {proposal.model_name || "model"} {proposal.model_version ? `(${proposal.model_version})` : ""} ·{" "}
              {seconds(proposal.latency_ms)} to answer
              {step.proposals.length > 1 ? ` · ${step.proposals.length} samples` : ""}
            </p>
          ) : null}
          {proposal?.raw_text ? (
            <details>
              <summary>Raw model text</summary>
              <pre className="json">{proposal.raw_text}</pre>
            </details>
          ) : null}
        </section>
        <section aria-labelledby={`final-${step.index}`} className="card">
          <h3 id={`final-${step.index}`}>
            <span className="swatch" style={{ background: FINAL_COLOUR }} /> Final step
          </h3>
          {step.decision ? (
            <>
              <p>
                <span className={`badge badge-${step.decision}`} data-testid="decision">
                  {DECISION_LABEL[step.decision]}
                </span>{" "}
                {step.decided_by ? (
                  <>
                    by <strong>{step.decided_by}</strong>{" "}
                  </>
                ) : (
                  "by the model, nobody deciding, "
                )}
                on {when(step.decided_at)}
                {step.decision_ms !== null ? ` after ${seconds(step.decision_ms)}` : ""}
              </p>
              {step.no_visible_effect ? (
                <p className="warn" role="note" data-testid="no-visible-effect">
                  <strong>No visible effect:</strong> the screen after this action was the one it was decided on,
                  though the action was meant to change it (keys swallowed, a lost focus). Check it before trusting
                  it as data.
                </p>
              ) : null}
              <ActionBlock label="final" thought={step.final_thought} text={step.final_action_text} json={step.final_action} />
            </>
          ) : (
            <p className="empty">{undecidedNote(episode, step.index)}</p>
          )}
          {step.revisions.map((r) => (
            <div key={r.number} className="revision">
              <h4>
                Revision {r.number} by {r.author}, {when(r.created_at)} — {DECISION_LABEL[r.decision]}
              </h4>
              <ActionBlock label={`revision-${r.number}`} thought={r.final_thought} text={r.final_action_text} json={r.final_action} />
              {r.note ? <p>{r.note}</p> : null}
            </div>
          ))}
        </section>
      </div>
    </div>
  );
}

function ReviewForm({ episode, onDone }: { episode: Episode; onDone: () => void }) {
  const [verdict, setVerdict] = useState<"accepted" | "rejected">("accepted");
  const [firstWrong, setFirstWrong] = useState<string>("");
  const [comment, setComment] = useState("");
  const { error, busy, dismiss, onSubmit } = useSubmit();
  const submit = onSubmit(async () => {
    await api.post<Review>(`/api/episodes/${episode.id}/reviews/`, {
      verdict,
      first_wrong_step: verdict === "rejected" && firstWrong ? Number(firstWrong) : null,
      comment,
    });
    // The verdict is recorded: the form starts afresh for the next one.
    setComment("");
    setFirstWrong("");
    setVerdict("accepted");
    onDone();
  });
  return (
    <form className="card review-form" onSubmit={submit} aria-labelledby="review-heading">
      <h2 id="review-heading">Review</h2>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <fieldset>
        <legend>Verdict</legend>
        <label>
          <input type="radio" name="verdict" value="accepted" checked={verdict === "accepted"} onChange={() => setVerdict("accepted")} />{" "}
          Accept the episode
        </label>
        <label>
          <input type="radio" name="verdict" value="rejected" checked={verdict === "rejected"} onChange={() => setVerdict("rejected")} />{" "}
          Reject it
        </label>
      </fieldset>
      {verdict === "rejected" ? (
        <label className="field">
          First wrong step (the steps before it stay usable)
          <select value={firstWrong} onChange={(e) => setFirstWrong(e.target.value)}>
            <option value="">None marked: reject the whole episode</option>
            {episode.steps.map((s) => (
              <option key={s.index} value={s.index}>
                Step {s.index}: {s.final_action_text ?? "undecided"}
              </option>
            ))}
          </select>
        </label>
      ) : null}
      <label className="field">
        Comment
        <textarea value={comment} onChange={(e) => setComment(e.target.value)} rows={2} />
      </label>
      <Button type="submit" variant={verdict === "accepted" ? "primary" : "danger"} disabled={busy} disabledReason="Saving the review…">
        {verdict === "accepted" ? "Accept episode" : "Reject episode"}
      </Button>
    </form>
  );
}

/** Where a rollout's batch page is, from the project page's Rollouts tab. */
export function projectBatchPath(episode: Episode): string {
  return `/manage/projects/${episode.project}/rollouts/${episode.rollout_batch}`;
}

/** The episode viewer; `back` says where its "back" link leads for the episode shown (the
 * project's episodes, or the review queue), and `batchPath` where a rollout's batch is. */
export function EpisodeViewer({
  back,
  batchPath = projectBatchPath,
}: {
  back: (episode: Episode) => { to: string; label: string };
  batchPath?: (episode: Episode) => string;
}) {
  const { episodeId } = useParams();
  const me = useMe();
  const { data: episode, error, reload } = useApi<Episode>(`/api/episodes/${episodeId}/`);
  const [selected, setSelected] = useState(1);
  useEffect(() => {
    if (episode && !episode.steps.some((s) => s.index === selected) && episode.steps.length) {
      setSelected(episode.steps[0].index);
    }
  }, [episode, selected]);
  const running = episode !== null && episode.ended_at === null;
  const scoring = episode?.evaluation_status === "pending";
  // A running episode gains steps while it is watched, and an ended one gets its score once the
  // task's evaluator has run: read it again every few seconds meanwhile.
  usePoll(reload, running || scoring, 5000);
  // A layout effect: the keys work from the moment the steps are shown, not a frame later.
  useLayoutEffect(() => {
    // ← and → walk through the steps, unless the reviewer is typing.
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      if (!episode || target?.closest("input, textarea, select") || event.altKey || event.ctrlKey || event.metaKey) return;
      const indexes = episode.steps.map((s) => s.index);
      const at = indexes.indexOf(selected);
      if (event.key === "ArrowRight" && at < indexes.length - 1) setSelected(indexes[at + 1]);
      else if (event.key === "ArrowLeft" && at > 0) setSelected(indexes[at - 1]);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [episode, selected]);
  if (error) return <ErrorBanner error={error} />;
  if (!episode) return <Loading />;
  const step = episode.steps.find((s) => s.index === selected) ?? null;
  const latest = episode.reviews[0] ?? null;
  const backLink = back(episode);
  const reviews = ["admin", "manager", "reviewer"].includes(roleIn(me, episode.project) ?? "");
  const autonomous = episode.mode === "autonomous";
  const manages = ["admin", "manager"].includes(roleIn(me, episode.project) ?? "");
  return (
    <div className="episode-viewer">
      <p>
        <Link to={backLink.to}>← {backLink.label}</Link>
      </p>
      <h1>
        Episode {episode.id}: {episode.instruction}
      </h1>
      <p className="meta" data-testid="episode-meta">
        Task {episode.task_external_id} ({episode.task_status.replace("_", " ")}) · {autonomous ? "rollout started by" : "annotator"}{" "}
        <strong>{episode.annotator}</strong> · model {episode.model_version || "unknown"} · started{" "}
        {when(episode.started_at)} · {episode.ended_at ? `${episode.outcome} ${when(episode.ended_at)}` : "running"}
        {episode.end_reason ? ` (${episode.end_reason})` : ""}
      </p>
      {latest ? (
        <p className={`verdict verdict-${latest.verdict}`} data-testid="latest-review">
          {latest.verdict === "accepted" ? "Accepted" : "Rejected"} by {latest.reviewer} on {when(latest.created_at)}
          {latest.first_wrong_step !== null ? ` — first wrong step ${latest.first_wrong_step}` : ""}
          {latest.comment ? `: ${latest.comment}` : ""}
        </p>
      ) : null}
      {autonomous && episode.rollout !== null ? (
        <RolloutPanel rolloutId={episode.rollout} batchPath={batchPath(episode)} reviewedAt={latest?.created_at ?? null} reviews={reviews} />
      ) : null}
      {autonomous && episode.ended_at !== null ? (
        <SendToAnnotators episode={episode} selected={selected} reviews={reviews} onDone={reload} />
      ) : null}
      <BranchOrigin episode={episode} />
      {episode.steps.some((s) => s.decision === "demonstrated") ? (
        <p className={`replay-check replay-${episode.replay_check?.status ?? "none"}`} data-testid="replay-check">
          <strong>{episode.demonstration ? "Demonstrated" : "Partly demonstrated (taken over)"} by the annotator.</strong>{" "}
          {replayCheckText(episode.replay_check) || "Not replayed."}
        </p>
      ) : null}
      <EvaluationPanel episode={episode} />
      {episode.ended_at === null ? <LiveView episodeId={episode.id} last={episode.steps[episode.steps.length - 1] ?? null} /> : null}
      <div className="viewer-body">
        <nav aria-label="Steps" className="step-list">
          <h2>Steps ({episode.steps.length})</h2>
          <p className="meta">The left and right arrow keys move between steps.</p>
          <ol>
            {episode.steps.map((s) => (
              <li key={s.index}>
                <button
                  type="button"
                  className={s.index === selected ? "step-button current" : "step-button"}
                  aria-current={s.index === selected ? "step" : undefined}
                  onClick={() => setSelected(s.index)}
                >
                  <span>Step {s.index}</span>
                  <span className="step-badges">
                    <span className={`badge badge-${s.decision || "open"}`}>{stepBadge(episode, s)}</span>
                    {reflectsOn(episode.steps, s) !== null ? <span className="badge badge-reflection">reflection</span> : null}
                    {latest?.first_wrong_step === s.index ? <span className="badge badge-wrong">first wrong</span> : null}
                  </span>
                </button>
              </li>
            ))}
          </ol>
          {episode.ended_at !== null && reviews ? <ReviewForm episode={episode} onDone={reload} /> : null}
          {episode.reviews.length > 1 ? (
            <section>
              <h3>Earlier reviews</h3>
              <ul>
                {episode.reviews.slice(1).map((r) => (
                  <li key={r.id}>
                    {r.verdict} by {r.reviewer}, {when(r.created_at)}
                    {r.first_wrong_step !== null ? ` (first wrong step ${r.first_wrong_step})` : ""}
                  </li>
                ))}
              </ul>
            </section>
          ) : null}
        </nav>
        <section className="step-main" aria-label={`Step ${selected}`}>
          {step ? <StepDetail step={step} episode={episode} /> : <p className="empty">This episode has no steps.</p>}
          {step && manages && episode.ended_at !== null && step.decision ? <GoldPanel episode={episode} step={step} /> : null}
        </section>
      </div>
    </div>
  );
}
