/**
 * The episode viewer's panel for a rollout (an autonomous episode): why it stopped, its
 * validation V and each part's verdict and reason (the rule checks one by one), where V sends
 * it (SFT or CT), and the way back to its batch. For a rollout the review form below is the
 * human part of V. Read again while the rollout runs or is being validated.
 */
import { Link } from "react-router-dom";
import { ErrorBanner, Loading, useApi, usePoll } from "../ui";
import {
  CHECK_LABEL,
  PART_LABEL,
  partVerdictText,
  partsOf,
  rolloutLive,
  stopReasonText,
  verdictText,
  type Rollout,
  type ValidationPart,
} from "../pages/engineer/rollouts";
import { when } from "../ui/format";

function Part({ part }: { part: ValidationPart }) {
  const checks = part.name === "rules" ? (part.details.checks ?? []) : [];
  const word = partVerdictText(part.passed);
  return (
    <li className="validation-part" data-testid={`part-${part.name}`}>
      <strong>{PART_LABEL[part.name] ?? part.name}</strong>{" "}
      <span className={`badge badge-part-${part.passed === null ? "unknown" : part.passed ? "pass" : "fail"}`}>{word}</span>{" "}
      <span>{part.reason}</span>
      {checks.length > 0 ? (
        <ul className="rule-checks" aria-label="Rule checks">
          {checks.map((c) => (
            <li key={c.name} data-testid={`check-${c.name}`}>
              <span className={`badge badge-part-${c.passed ? "pass" : "fail"}`}>{c.passed ? "passed" : "failed"}</span>{" "}
              {CHECK_LABEL[c.name] ?? c.name}
              {c.reason ? <span className="meta"> — {c.reason}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </li>
  );
}

const ROUTED: Record<string, string> = {
  sft: "its steps are SFT samples (rejection sampling)",
  ct: "its trajectory is a CT sample",
};

/** The panel of rollout `rolloutId`; `reviewedAt` is when the episode's latest review was
 * given, after which V is judged again; `reviews`: the reader may review it, which gives V its
 * human part where the project's validation has one. */
export function RolloutPanel({
  rolloutId,
  batchPath,
  reviewedAt,
  reviews,
}: {
  rolloutId: number;
  batchPath: string;
  reviewedAt: string | null;
  reviews: boolean;
}) {
  const { data: rollout, error, reload } = useApi<Rollout>(`/api/rollouts/${rolloutId}/`);
  usePoll(reload, rollout !== null && rolloutLive(rollout, reviewedAt), 3000);
  return (
    <section className="card rollout-panel" aria-labelledby="rollout-heading" data-testid="rollout-panel">
      <h2 id="rollout-heading">Rollout</h2>
      <ErrorBanner error={error} />
      {!rollout && !error ? <Loading /> : null}
      {rollout ? (
        <>
          <p>
            <Link to={batchPath}>← Rollout batch #{rollout.batch}</Link> · task <code>{rollout.task}</code>, sample {rollout.sample + 1}
            {rollout.attempt > 1 ? ` (attempt ${rollout.attempt})` : ""} · run autonomously by {rollout.model_version || "the model"}
          </p>
          <dl className="kv kv-wide">
            <dt>Status</dt>
            <dd data-testid="rollout-status">{rollout.status}</dd>
            <dt>Stopped</dt>
            <dd data-testid="rollout-stop">{stopReasonText(rollout.stop_reason)}</dd>
            <dt>Validation</dt>
            <dd>
              <span
                className={`badge badge-v-${rollout.verdict === null ? "unknown" : rollout.verdict ? "pass" : "fail"}`}
                data-testid="rollout-verdict"
              >
                {verdictText(rollout)}
              </span>
              {rollout.validation.routed ? ` — ${ROUTED[rollout.validation.routed]}` : ""}
              {rollout.status === "validated" && rollout.verdict === null ? " — in no dataset until every part is known" : ""}
              {rollout.validation.at ? <span className="meta"> (judged {when(rollout.validation.at)})</span> : null}
            </dd>
            <dt>Cost</dt>
            <dd>
              {rollout.steps} step{rollout.steps === 1 ? "" : "s"}, {rollout.tokens.toLocaleString("en")} tokens
            </dd>
          </dl>
          {partsOf(rollout.validation).length > 0 ? (
            <ul className="validation-parts" aria-label="Validation parts">
              {partsOf(rollout.validation).map((p) => (
                <Part key={p.name} part={p} />
              ))}
            </ul>
          ) : (
            <p className="meta">Not validated yet: the parts are judged once the rollout has ended.</p>
          )}
          {reviews && partsOf(rollout.validation).some((p) => p.name === "human") ? (
            <p className="meta" data-testid="human-part-note">
              Your review of this episode (the form beside the steps) is the human part of V; the rollout is judged again after each
              review.
            </p>
          ) : null}
        </>
      ) : null}
    </section>
  );
}
