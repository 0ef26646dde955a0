/**
 * The flywheel of one project: per model version, in the order the versions were made, its
 * rollouts' success rate, people's acceptance of its proposals and its offline step success
 * rate as lines, the samples it was trained on as bars, and every figure with its counts in a
 * table under them. For the project's managers and engineers.
 */
import { Link } from "react-router-dom";
import { ErrorBanner, Loading, Table, useApi } from "../../ui";
import { BarChart, LineChart } from "../../ui/svgCharts";
import { score } from "../../episode/evaluation";
import { when } from "../../ui/format";
import {
  datasetText,
  liveCell,
  offlineCell,
  rateSeries,
  rolloutCell,
  trainedOnCell,
  trainedSeries,
  type Flywheel as FlywheelFigures,
} from "./flywheel";

export function Flywheel({ project }: { project: string }) {
  const { data, error } = useApi<FlywheelFigures>(project ? `/api/projects/${project}/flywheel/` : null);
  if (error) return <ErrorBanner error={error} />;
  if (!data) return project ? <Loading /> : <p className="empty">Choose a project to see its flywheel.</p>;
  const versions = data.versions;
  const labels = versions.map((v) => v.name);
  return (
    <div data-testid="flywheel">
      <p className="meta">
        Rollout success rate: the share of validated rollouts whose validation V(s) is 1. Live acceptance: the share of people&apos;s decided
        steps on the version&apos;s proposals they accepted, over the last {data.acceptance_window_days} days. Offline step success: the
        latest finished evaluation on this project&apos;s held-out steps.
      </p>
      {versions.length === 0 ? (
        <p className="empty">
          No model version has served, been evaluated or been fine-tuned in this project yet: choose a version for it or start a
          rollout batch.
        </p>
      ) : (
        <>
          <div className="charts">
            <LineChart title="Per model version, oldest first" labels={labels} series={rateSeries(versions)} testId="flywheel-chart" />
            <BarChart title="Samples of this project each version was trained on" labels={labels} series={trainedSeries(versions)} />
          </div>
          <Table
            caption="The flywheel's generations"
            rows={versions}
            rowKey={(v) => v.id}
            columns={[
              { header: "Model version", cell: (v) => <Link to={`/engineer/models/${v.id}`}>{v.name}</Link> },
              { header: "Parent or base model", cell: (v) => v.parent ?? v.base_model },
              { header: "Created", cell: (v) => when(v.created_at) },
              { header: "Proposes now", cell: (v) => v.proposes ?? "—" },
              { header: "Rollouts (success: V = 1 among validated)", cell: (v) => rolloutCell(v.rollouts) },
              { header: "Rollouts' mean task success", cell: (v) => (v.rollouts.scored ? score(v.rollouts.task_success) : "no rollout scored yet") },
              { header: "Live acceptance", cell: (v) => liveCell(v.live, data.acceptance_window_days) },
              { header: "Offline step success", cell: (v) => offlineCell(v.offline) },
              { header: "Trained on", cell: trainedOnCell },
            ]}
          />
        </>
      )}
      <h3>Datasets of this project now</h3>
      {data.datasets.length === 0 ? (
        <p className="empty">No dataset export of this project has succeeded yet: the next version has nothing to be trained on.</p>
      ) : (
        <ul data-testid="flywheel-datasets">
          {data.datasets.map((d) => (
            <li key={d.export}>
              {datasetText(d)}, exported {when(d.created_at)}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
