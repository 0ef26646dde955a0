/**
 * What a task's evaluator made of an episode: the task-success cell of the episode tables, and
 * the viewer's panel with the score, its reason, each metric (score, skipped or error, what the
 * getters returned against what was expected), the postconfig log, and what the task's setup
 * went on after. Shown to those who view the project's episodes; the server leaves the fields
 * out for anyone else, and so do these.
 */
import { metricVerdict, score, shortened, taskSuccessCell } from "./evaluation";
import type { Episode, EpisodeSummary } from "../domain/api";

export function TaskSuccess({ episode }: { episode: EpisodeSummary }) {
  const cell = taskSuccessCell(episode);
  return (
    <span title={cell.title || undefined} data-testid={`task-success-${episode.id}`}>
      {cell.text}
    </span>
  );
}

function SetupLog({ lines }: { lines: string[] }) {
  if (lines.length === 0) return null;
  return (
    <div className="warn" data-testid="setup-log">
      Setup went on after:
      <ul>
        {lines.map((line, i) => (
          <li key={i}>{line}</li>
        ))}
      </ul>
    </div>
  );
}

function Verdict({ episode }: { episode: Episode }) {
  const evaluation = episode.evaluation ?? {};
  switch (episode.evaluation_status) {
    case "pending":
      return <p className="meta">The task&apos;s evaluator is scoring this episode; this page refreshes until it is done.</p>;
    case "failed":
      return <p className="warn">Not scored: {evaluation.error || "the evaluator could not run."}</p>;
    case "scored":
      break;
    default:
      return <p className="meta">Not scored: the task has no evaluator, or the episode did not end with work to score.</p>;
  }
  const metrics = evaluation.metrics ?? [];
  const postconfig = evaluation.postconfig_log ?? [];
  return (
    <>
      <p>
        Task success <strong data-testid="task-success">{score(episode.task_success)}</strong>
        {evaluation.reason ? ` — ${evaluation.reason}` : ""}
        {metrics.length > 1 && evaluation.conjunction ? ` (metrics joined by “${evaluation.conjunction}”)` : ""}
      </p>
      {metrics.length > 0 ? (
        <table className="table" data-testid="evaluation-metrics">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Metric</th>
              <th scope="col">Score</th>
              <th scope="col">Result</th>
              <th scope="col">Expected</th>
            </tr>
          </thead>
          <tbody>
            {metrics.map((m) => (
              <tr key={m.index}>
                <td>{m.index}</td>
                <td>
                  <code>{m.func}</code>
                </td>
                <td>{metricVerdict(m)}</td>
                <td>
                  <code title={typeof m.result === "string" ? m.result : undefined}>{shortened(m.result)}</code>
                </td>
                <td>
                  <code title={typeof m.expected === "string" ? m.expected : undefined}>{shortened(m.expected)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {postconfig.length > 0 ? (
        <details open>
          <summary>Postconfig log ({postconfig.length})</summary>
          <pre className="json" data-testid="postconfig-log">
            {postconfig.join("\n")}
          </pre>
        </details>
      ) : null}
    </>
  );
}

export function EvaluationPanel({ episode }: { episode: Episode }) {
  const setupLog = episode.setup_log ?? [];
  // Left out for a reader who may not see it, and when there is nothing to say.
  if (episode.evaluation_status === undefined || (episode.evaluation_status === "" && setupLog.length === 0)) return null;
  return (
    <section className="card evaluation" aria-labelledby="evaluation-heading" data-testid="evaluation-panel">
      <h2 id="evaluation-heading">Evaluation</h2>
      <Verdict episode={episode} />
      <SetupLog lines={setupLog} />
    </section>
  );
}
