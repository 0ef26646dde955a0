/** The reviewer's pages: the queue of submitted episodes of their projects, oldest first
 * (`?project=<id>`: of one project), and the episode viewer with the review form. */
import { Link, Route, Routes, useSearchParams } from "react-router-dom";
import type { Page } from "../../api";
import { Button, ErrorBanner, ForRoles, Loading, ProjectSelect, Table, useApi, useMe } from "../../ui";
import { TaskSuccess } from "../../episode/Evaluation";
import { EpisodeViewer } from "../../episode/EpisodeViewer";
import { ranBy, when } from "../../ui/format";
import type { EpisodeSummary } from "../../domain/api";
import "../manager/manager.css";

function ReviewQueue() {
  const me = useMe();
  const [params, setParams] = useSearchParams();
  const project = params.get("project") ?? "";
  const { data, error, loading, reload } = useApi<Page<EpisodeSummary>>(
    `/api/review-queue/?page_size=100${project ? `&project=${project}` : ""}`,
  );
  const reviewed = me.memberships.filter((m) => m.role === "reviewer" || m.role === "manager");
  return (
    <>
      <h1>Review queue</h1>
      <div className="form-row">
        <ProjectSelect
          projects={reviewed.map((m) => ({ id: m.project, name: m.project_name }))}
          value={project}
          onChange={(chosen) => setParams(chosen ? { project: chosen } : {})}
          anyLabel="All my projects"
        />
        <Button onClick={reload} disabled={loading} disabledReason="Loading…">
          Refresh
        </Button>
      </div>
      <ErrorBanner error={error} />
      {!data ? <Loading /> : null}
      {data ? (
        <Table
          caption={`${data.count} episode${data.count === 1 ? "" : "s"} waiting for a verdict`}
          rows={data.results}
          rowKey={(e) => e.id}
          empty="Nothing to review: every submitted episode has a verdict."
          columns={[
            { header: "Episode", cell: (e) => <Link to={`episodes/${e.id}`}>Episode {e.id}</Link> },
            { header: "Project", cell: (e) => e.project_name },
            { header: "Instruction", cell: (e) => e.instruction },
            { header: "Annotator", cell: (e) => ranBy(e) },
            { header: "Steps", cell: (e) => e.step_count },
            { header: "Outcome", cell: (e) => e.outcome },
            { header: "Task success", cell: (e) => <TaskSuccess episode={e} /> },
            { header: "Ended", cell: (e) => when(e.ended_at) },
          ]}
        />
      ) : null}
    </>
  );
}

const BACK_TO_QUEUE = { to: "/review", label: "Review queue" };

export function ReviewerRoutes() {
  return (
    <ForRoles roles={["reviewer", "manager"]} forWhom="reviewers and project managers" title="Review queue">
      <Routes>
        <Route index element={<ReviewQueue />} />
        <Route path="episodes/:episodeId" element={<EpisodeViewer back={() => BACK_TO_QUEUE} />} />
      </Routes>
    </ForRoles>
  );
}
