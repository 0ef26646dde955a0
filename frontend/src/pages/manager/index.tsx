/** The project manager's pages: projects, each project's board, tasks, charts and episodes,
 * and the episode viewer. */
import { Route, Routes } from "react-router-dom";
import { EpisodeViewer } from "./EpisodeViewer";
import { ProjectPage } from "./ProjectPage";
import { ProjectList } from "./Projects";

export function ManagerRoutes() {
  return (
    <Routes>
      <Route index element={<ProjectList />} />
      <Route path="projects/:projectId/*" element={<ProjectPage />} />
      <Route path="episodes/:episodeId" element={<EpisodeViewer backTo="/manage" backLabel="Projects" />} />
    </Routes>
  );
}
