/** One project for its manager or reviewer: board, charts, episodes and rollout batches, and
 * for managers its tasks, the model versions it runs, its dataset exports, the fine-tuning
 * jobs trained on them and the flywheel chart, as tabs; managers also start and steer rollout batches. A tab the
 * user's role in the project cannot use says whom it is for. */
import type { ReactNode } from "react";
import { NavLink, Navigate, Route, Routes, useParams } from "react-router-dom";
import type { Project } from "../../api";
import { ErrorBanner, Loading, NotForYourRole, useApi } from "../../ui";
import { Exports } from "../engineer/Exports";
import { FineTuning } from "../engineer/FineTuning";
import { Flywheel } from "../engineer/Flywheel";
import { RolloutBatchPage } from "../engineer/RolloutBatchPage";
import { Rollouts } from "../engineer/Rollouts";
import type { RolloutPaths } from "../engineer/rollouts";
import { ProgressBoard } from "./Board";
import { ProjectCharts } from "./Charts";
import { EpisodeList } from "./Episodes";
import { ProjectMembers } from "./Members";
import { ProjectModels } from "./ProjectModels";
import { Quality } from "./Quality";
import { TaskManager } from "./Tasks";

function rolloutPaths(project: string): RolloutPaths {
  return {
    list: () => `/manage/projects/${project}/rollouts`,
    batch: (id) => `/manage/projects/${project}/rollouts/${id}`,
    episode: (id) => `/manage/episodes/${id}`,
  };
}

export function ProjectPage() {
  const { projectId = "" } = useParams();
  const { data: project, error, reload } = useApi<Project>(`/api/projects/${projectId}/`);
  if (error) return <ErrorBanner error={error} />;
  if (!project) return <Loading />;
  const role = typeof project.my_role === "string" ? project.my_role : null;
  const manages = role === "manager" || role === "admin";
  const oversees = manages || role === "reviewer";
  const only = (allowed: boolean, forWhom: string, page: ReactNode) =>
    allowed ? page : <NotForYourRole forWhom={forWhom} roles={role ? [role] : []} inProject />;
  const forManagers = (page: ReactNode) => only(manages, "project managers", page);
  const forOverseers = (page: ReactNode) => only(oversees, "project managers and reviewers", page);
  return (
    <>
      <h1>{project.name}</h1>
      {oversees ? (
        <nav className="tabs" aria-label="Project sections">
          <NavLink to="board">Progress</NavLink>
          {manages ? <NavLink to="tasks">Tasks</NavLink> : null}
          {manages ? <NavLink to="members">Members and desktop</NavLink> : null}
          <NavLink to="charts">Charts</NavLink>
          <NavLink to="episodes">Episodes</NavLink>
          <NavLink to="quality">Quality</NavLink>
          {manages ? <NavLink to="models">Model versions</NavLink> : null}
          {manages ? <NavLink to="exports">Dataset exports</NavLink> : null}
          {manages ? <NavLink to="finetune">Fine-tuning jobs</NavLink> : null}
          {manages ? <NavLink to="flywheel">Flywheel</NavLink> : null}
          <NavLink to="rollouts">Rollouts</NavLink>
        </nav>
      ) : null}
      <Routes>
        <Route index element={<Navigate to="board" replace />} />
        <Route path="board" element={forOverseers(<ProgressBoard projectId={projectId} />)} />
        <Route path="tasks" element={forManagers(<TaskManager projectId={projectId} />)} />
        <Route path="members" element={forManagers(<ProjectMembers project={project} onProjectChanged={reload} />)} />
        <Route path="charts" element={forOverseers(<ProjectCharts projectId={projectId} />)} />
        <Route path="episodes" element={forOverseers(<EpisodeList projectId={projectId} />)} />
        <Route path="quality" element={forOverseers(<Quality projectId={projectId} />)} />
        <Route path="models" element={forManagers(<ProjectModels projectId={projectId} manages={manages} />)} />
        <Route path="exports" element={forManagers(<Exports project={projectId} />)} />
        <Route path="finetune" element={forManagers(<FineTuning project={projectId} />)} />
        <Route path="flywheel" element={forManagers(<FlywheelTab projectId={projectId} />)} />
        <Route path="rollouts" element={forOverseers(<Rollouts project={projectId} paths={rolloutPaths(projectId)} />)} />
        <Route path="rollouts/:batchId" element={forOverseers(<RolloutBatchPage paths={rolloutPaths(projectId)} />)} />
      </Routes>
    </>
  );
}

function FlywheelTab({ projectId }: { projectId: string }) {
  return (
    <section aria-labelledby="flywheel-heading">
      <h2 id="flywheel-heading">The flywheel: each model version&apos;s rollouts, live acceptance and offline step success</h2>
      <Flywheel project={projectId} />
    </section>
  );
}
