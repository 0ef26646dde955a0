/** The project's annotators' scorecards: each person's work over a period, sortable, and the
 * same as CSV, with each pair's agreement, the daily chart, the quality settings and the
 * honeypots (annotation/quality/ says how each figure is made). */
import { useState } from "react";
import { ErrorBanner, Loading, useApi } from "../../ui";
import { LineChart } from "../../ui/svgCharts";
import { dailyRates, rateText, sorted, type QualityReport, type Scorecard, type SortKey } from "../../domain/quality";
import { Honeypots, QualitySettings } from "./QualitySettings";

const COLUMNS: { key: SortKey; header: string; cell: (c: Scorecard) => string }[] = [
  { key: "annotator", header: "Annotator", cell: (c) => c.annotator },
  { key: "episodes", header: "Episodes", cell: (c) => String(c.episodes) },
  { key: "decided_steps", header: "Steps decided", cell: (c) => String(c.decided_steps) },
  { key: "demonstrated_steps", header: "Steps demonstrated", cell: (c) => String(c.demonstrated_steps) },
  {
    key: "gold_accuracy",
    header: "Gold accuracy (95% interval)",
    cell: (c) => rateText(c.gold_accuracy, c.gold_accuracy_low, c.gold_accuracy_high, c.gold_right, c.gold_steps),
  },
  {
    key: "agreement",
    header: "Agreement (95% interval)",
    cell: (c) => rateText(c.agreement, c.agreement_low, c.agreement_high, c.agreed_steps, c.compared_steps),
  },
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
  const { data, error } = useApi<QualityReport>(path);
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
      {data && <Agreement report={data} />}
      <QualitySettings projectId={projectId} />
      <Honeypots projectId={projectId} />
    </section>
  );
}

function Agreement({ report }: { report: QualityReport }) {
  const gold = dailyRates(report.timeline, "gold_accuracy");
  const agreement = dailyRates(report.timeline, "agreement");
  return (
    <>
      <h3>Agreement between annotators</h3>
      {report.pairs.length === 0 ? (
        <p className="empty">No task was done by two annotators in this period.</p>
      ) : (
        <table className="table" data-testid="agreement-pairs">
          <thead>
            <tr>
              <th scope="col">Annotators</th>
              <th scope="col">Steps compared</th>
              <th scope="col">Agreed</th>
              <th scope="col">Agreement</th>
            </tr>
          </thead>
          <tbody>
            {report.pairs.map((p) => (
              <tr key={p.annotators.join("+")}>
                <td>{p.annotators.join(" and ")}</td>
                <td>{p.compared_steps}</td>
                <td>{p.agreed_steps}</td>
                <td>{p.agreement.toFixed(2)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {report.tasks.some((t) => t.agreement < 1) && (
        <table className="table" data-testid="disputed-tasks">
          <caption>Tasks whose annotators disagreed (their episodes come first in the review queue)</caption>
          <thead>
            <tr>
              <th scope="col">Task</th>
              <th scope="col">Steps compared</th>
              <th scope="col">Agreed</th>
              <th scope="col">Agreement</th>
            </tr>
          </thead>
          <tbody>
            {report.tasks
              .filter((t) => t.agreement < 1)
              .map((t) => (
                <tr key={t.task}>
                  <td>{t.external_id}</td>
                  <td>{t.compared_steps}</td>
                  <td>{t.agreed_steps}</td>
                  <td>{t.agreement.toFixed(2)}</td>
                </tr>
              ))}
          </tbody>
        </table>
      )}
      {gold.days.length > 0 && (
        <LineChart title="Gold accuracy per day (UTC)" labels={gold.days} series={gold.series} testId="gold-chart" />
      )}
      {agreement.days.length > 0 && (
        <LineChart title="Agreement per day (UTC)" labels={agreement.days} series={agreement.series} testId="agreement-chart" />
      )}
    </>
  );
}
