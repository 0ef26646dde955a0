/** The project's annotators' scorecards: each person's work over a period, sortable, and the
 * same as CSV (annotation/quality/scorecards.py says how each figure is made). */
import { useState } from "react";
import { ErrorBanner, Loading, useApi } from "../../ui";
import { rateText, sorted, type Scorecard, type SortKey } from "../../domain/quality";

const COLUMNS: { key: SortKey; header: string; cell: (c: Scorecard) => string }[] = [
  { key: "annotator", header: "Annotator", cell: (c) => c.annotator },
  { key: "episodes", header: "Episodes", cell: (c) => String(c.episodes) },
  { key: "decided_steps", header: "Steps decided", cell: (c) => String(c.decided_steps) },
  { key: "demonstrated_steps", header: "Steps demonstrated", cell: (c) => String(c.demonstrated_steps) },
  {
    key: "review_acceptance",
    header: "Review acceptance (95% interval)",
    cell: (c) => rateText(c.review_acceptance, c.review_acceptance_low, c.review_acceptance_high, c.accepted, c.reviewed),
  },
  {
    key: "evaluator_success",
    header: "Evaluator success",
    cell: (c) => (c.evaluator_success === null ? "—" : `${c.evaluator_success.toFixed(2)} (${c.scored} scored)`),
  },
  {
    key: "median_decision_ms",
    header: "Median decision",
    cell: (c) => (c.median_decision_ms === null ? "—" : `${(c.median_decision_ms / 1000).toFixed(1)} s`),
  },
  { key: "steps_per_hour", header: "Steps per hour", cell: (c) => (c.steps_per_hour === null ? "—" : c.steps_per_hour.toFixed(1)) },
];

export function Quality({ projectId }: { projectId: string }) {
  const [from, setFrom] = useState("");
  const [until, setUntil] = useState("");
  const [key, setKey] = useState<SortKey>("annotator");
  const [descending, setDescending] = useState(false);
  const query = new URLSearchParams();
  if (from) query.set("ended_from", from);
  if (until) query.set("ended_until", until);
  const path = `/api/projects/${projectId}/scorecards/?${query}`;
  const { data, error } = useApi<{ scorecards: Scorecard[] }>(path);
  const sortBy = (next: SortKey) => {
    setDescending(next === key ? !descending : next !== "annotator");
    setKey(next);
  };
  return (
    <section aria-labelledby="quality-heading">
      <h2 id="quality-heading">Annotator quality</h2>
      <div className="form-row">
        <label className="field">
          Episodes ended from
          <input type="date" value={from} onChange={(e) => setFrom(e.target.value)} />
        </label>
        <label className="field">
          until (not included)
          <input type="date" value={until} onChange={(e) => setUntil(e.target.value)} />
        </label>
        <a className="btn" href={`${path}&as=csv`} download>
          Download as CSV
        </a>
      </div>
      <ErrorBanner error={error} />
      {!data ? (
        <Loading />
      ) : data.scorecards.length === 0 ? (
        <p className="empty">No annotator ended an episode in this period.</p>
      ) : (
        <table className="table" data-testid="scorecards">
          <thead>
            <tr>
              {COLUMNS.map((c) => (
                <th key={c.key} scope="col" aria-sort={c.key === key ? (descending ? "descending" : "ascending") : "none"}>
                  <button type="button" className="link-button" onClick={() => sortBy(c.key)}>
                    {c.header}
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {sorted(data.scorecards, key, descending).map((card) => (
              <tr key={card.annotator}>
                {COLUMNS.map((c) => (
                  <td key={c.key}>{c.cell(card)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
