/** The project manager's pages: projects, each project's board, tasks, charts and episodes,
 * and the episode viewer. Reviewers read projects and episodes here too; a project's page
 * offers each user only the tabs of their role in that project. */
import type { ReactNode } from "react";
import { Route, Routes } from "react-router-dom";
import { ForRoles } from "../../ui";
import { EpisodeViewer } from "../../episode/EpisodeViewer";
import { ProjectPage } from "./ProjectPage";
import { ProjectList } from "./Projects";
import type { Episode } from "../../domain/api";

function ForOverseers({ title, children }: { title: string; children: ReactNode }) {
  return (
    <ForRoles roles={["manager", "reviewer"]} forWhom="project managers and reviewers" title={title}>
      {children}
    </ForRoles>
  );
}

function backToEpisodes(episode: Episode) {
  return { to: `/manage/projects/${episode.project}/episodes`, label: `Episodes of ${episode.project_name}` };
}

export function ManagerRoutes() {
  return (
    <Routes>
      <Route
        index
        element={
          <ForOverseers title="Projects">
            <ProjectList />
          </ForOverseers>
        }
      />
      <Route path="projects/:projectId/*" element={<ProjectPage />} />
      <Route
        path="episodes/:episodeId"
        element={
          <ForOverseers title="Episode">
            <EpisodeViewer back={backToEpisodes} />
          </ForOverseers>
        }
      />
    </Routes>
  );
}
