/**
 * The versions of one project side by side: each version's live acceptance rate (annotators'
 * decisions on its proposals) next to its latest offline step success rate on the project's
 * held-out steps, with the counts behind both and which version is A or B.
 */
import { Link } from "react-router-dom";
import { counted, percent, when } from "../../ui/format";
import type { ModelVersion, ProjectVersions } from "./finetune";

function role(overview: ProjectVersions, name: string): string {
  if (overview.model_version === name) return "A";
  if (overview.version_b === name) return `B (${percent(overview.version_b_share)} of episodes)`;
  return "—";
}

export function VersionComparison({
  overview,
  versions,
  caption,
}: {
  overview: ProjectVersions;
  versions?: ModelVersion[];
  caption: string;
}) {
  const ids = new Map((versions ?? []).map((v) => [v.name, v.id]));
  if (overview.versions.length === 0) {
    return <p className="empty">No model version has proposed or been evaluated in this project yet.</p>;
  }
  return (
    <table className="table" data-testid="version-comparison">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Model version</th>
          <th scope="col">Proposes</th>
          <th scope="col">Live acceptance rate</th>
          <th scope="col">Live decisions (accepted / corrected / error kept)</th>
          <th scope="col">Offline step success rate</th>
          <th scope="col">Offline steps (invalid outputs)</th>
        </tr>
      </thead>
      <tbody>
        {overview.versions.map((row) => {
          const id = ids.get(row.model_version);
          return (
            <tr key={row.model_version} data-version={row.model_version}>
              <th scope="row">{id ? <Link to={`/engineer/models/${id}`}>{row.model_version}</Link> : row.model_version}</th>
              <td>{role(overview, row.model_version)}</td>
              <td data-testid="live-rate">{row.live ? percent(row.live.rate) : "—"}</td>
              <td>{row.live ? `${row.live.accepted} / ${row.live.corrected} / ${row.live.error_kept}` : "not used live yet"}</td>
              <td data-testid="offline-rate">{row.offline ? percent(row.offline.step_success_rate) : "—"}</td>
              <td>
                {row.offline
                  ? `${counted(row.offline.steps, "step")} (${row.offline.invalid} invalid), ${when(row.offline.finished_at)}`
                  : "not evaluated yet"}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
