/**
 * Model versions: every version with its base model, adapter, parent, job and serving status,
 * and, for a chosen project, each version's live acceptance rate next to its offline step
 * success rate, and the project's flywheel chart. Read again while a version loads on its
 * endpoint.
 */
import { Link, useSearchParams } from "react-router-dom";
import type { Page } from "../../api";
import { ErrorBanner, Loading, ProjectSelect, Table, useApi, usePoll, useReadableProjects } from "../../ui";
import { percent, when } from "../../ui/format";
import { Flywheel } from "./Flywheel";
import { VersionComparison } from "./VersionComparison";
import type { ModelVersion, ProjectVersions } from "./finetune";

export function ServingStatus({ version }: { version: Pick<ModelVersion, "serving_status" | "serving_error"> }) {
  return (
    <>
      <span className={`badge badge-serving-${version.serving_status}`}>{version.serving_status}</span>
      {version.serving_error ? <p className="warn serving-error">{version.serving_error}</p> : null}
    </>
  );
}

function latestSuccess(version: ModelVersion): string {
  const run = version.evaluations.find((e) => e.status === "succeeded");
  return run ? `${percent(run.success_rate)} (${run.succeeded}/${run.total}, project ${run.project_id})` : "—";
}

export function ModelVersions() {
  const versions = useApi<Page<ModelVersion>>("/api/model-versions/?page_size=200");
  const [params, setParams] = useSearchParams();
  const { projects, readable, project } = useReadableProjects(params.get("project") ?? "");
  const overview = useApi<ProjectVersions>(project ? `/api/projects/${project}/model-versions/` : null);
  const loading = (versions.data?.results ?? []).some((v) => v.serving_status === "loading");
  usePoll(versions.reload, loading);
  return (
    <>
      <section className="card" aria-labelledby="versions-heading">
        <h2 id="versions-heading">Model versions</h2>
        <ErrorBanner error={versions.error} />
        {versions.loading && !versions.data ? <Loading /> : null}
        {versions.data ? (
          <Table
            rows={versions.data.results}
            rowKey={(v) => v.id}
            empty="No model versions yet: a fine-tuning job registers one when it succeeds."
            columns={[
              { header: "Version", cell: (v) => <Link to={`/engineer/models/${v.id}`}>{v.name}</Link> },
              { header: "Base model", cell: (v) => v.base_model },
              { header: "Adapter", cell: (v) => (v.adapter_location ? "LoRA" : "none (the base model)") },
              { header: "Parent", cell: (v) => v.parent ?? "—" },
              { header: "Job", cell: (v) => (v.job ? <Link to={`/engineer/finetune/${v.job}`}>#{v.job}</Link> : "—") },
              { header: "Serving", cell: (v) => <ServingStatus version={v} /> },
              { header: "Latest step success", cell: latestSuccess },
              { header: "Created", cell: (v) => when(v.created_at) },
            ]}
          />
        ) : null}
      </section>
      <section className="card" aria-labelledby="compare-heading">
        <div className="range-form">
          <h2 id="compare-heading">Live, offline and the flywheel, per project</h2>
          <ProjectSelect projects={readable} value={project} onChange={(chosen) => setParams({ project: chosen })} />
        </div>
        <ErrorBanner error={projects.error ?? overview.error} />
        {overview.data ? (
          <VersionComparison
            overview={overview.data}
            versions={versions.data?.results}
            caption={`Acceptance over the last ${overview.data.acceptance_window_days} days next to the latest evaluation`}
          />
        ) : null}
        <h3>The flywheel</h3>
        <Flywheel project={project} />
      </section>
    </>
  );
}
