/** One project for its manager or reviewer: board, tasks, charts, episodes and (for managers)
 * the model versions it runs, as tabs. */
import { NavLink, Navigate, Route, Routes, useParams } from "react-router-dom";
import type { Project } from "../../api";
import { ErrorBanner, Loading, useApi } from "../../ui";
import { ProgressBoard } from "./Board";
import { ProjectCharts } from "./Charts";
import { EpisodeList } from "./Episodes";
import { ProjectModels } from "./ProjectModels";
import { TaskManager } from "./Tasks";

export function ProjectPage() {
  const { projectId = "" } = useParams();
  const { data: project, error } = useApi<Project>(`/api/projects/${projectId}/`);
  if (error) return <ErrorBanner error={error} />;
  if (!project) return <Loading />;
  const manages = project.my_role === "manager" || project.my_role === "admin";
  return (
    <>
      <h1>{project.name}</h1>
      <nav className="tabs" aria-label="Project sections">
        <NavLink to="board">Progress</NavLink>
        {manages ? <NavLink to="tasks">Tasks</NavLink> : null}
        <NavLink to="charts">Charts</NavLink>
        <NavLink to="episodes">Episodes</NavLink>
        {manages ? <NavLink to="models">Model versions</NavLink> : null}
        {manages ? <NavLink to={`/engineer/exports?project=${projectId}`}>Dataset exports</NavLink> : null}
        {manages ? <NavLink to="/engineer/finetune">Fine-tuning jobs</NavLink> : null}
      </nav>
      <Routes>
        <Route index element={<Navigate to="board" replace />} />
        <Route path="board" element={<ProgressBoard projectId={projectId} />} />
        <Route path="tasks" element={<TaskManager projectId={projectId} />} />
        <Route path="charts" element={<ProjectCharts projectId={projectId} />} />
        <Route path="episodes" element={<EpisodeList projectId={projectId} />} />
        <Route path="models" element={<ProjectModels projectId={projectId} manages={manages} />} />
      </Routes>
    </>
  );
}
