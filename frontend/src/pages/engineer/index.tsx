/** The ML engineer's pages: dataset exports, fine-tuning jobs, model versions, rollout batches
 * (with the rollouts' episodes) and personal access tokens. Managers see the exports, jobs and
 * batches of their projects on the project page and read them, and the versions, here too;
 * other roles are told whom the pages are for. */
import { NavLink, Navigate, Route, Routes } from "react-router-dom";
import { ForRoles } from "../../ui";
import { EpisodeViewer } from "../../episode/EpisodeViewer";
import type { Episode } from "../../domain/api";
import { Exports } from "./Exports";
import { FineTuneJobPage } from "./FineTuneJobPage";
import { FineTuning } from "./FineTuning";
import { ModelVersionPage } from "./ModelVersionPage";
import { ModelVersions } from "./ModelVersions";
import { RolloutBatchPage } from "./RolloutBatchPage";
import { Rollouts } from "./Rollouts";
import type { RolloutPaths } from "./rollouts";
import { Tokens } from "./Tokens";
import "../manager/manager.css";

const ROLLOUT_PATHS: RolloutPaths = {
  list: (project) => `/engineer/rollouts?project=${project}`,
  batch: (id) => `/engineer/rollouts/${id}`,
  episode: (id) => `/engineer/episodes/${id}`,
};

function backToBatch(episode: Episode) {
  return episode.rollout_batch === null
    ? { to: ROLLOUT_PATHS.list(episode.project), label: "Rollout batches" }
    : { to: ROLLOUT_PATHS.batch(episode.rollout_batch), label: `Rollout batch #${episode.rollout_batch}` };
}

function batchOf(episode: Episode): string {
  return episode.rollout_batch === null ? ROLLOUT_PATHS.list(episode.project) : ROLLOUT_PATHS.batch(episode.rollout_batch);
}

export function EngineerRoutes() {
  return (
    <ForRoles roles={["engineer", "manager"]} forWhom="ML engineers and project managers" title="Datasets and models">
      <h1>Datasets and models</h1>
      <nav className="tabs" aria-label="Engineer sections">
        <NavLink to="exports">Dataset exports</NavLink>
        <NavLink to="finetune">Fine-tuning</NavLink>
        <NavLink to="models">Model versions</NavLink>
        <NavLink to="rollouts">Rollouts</NavLink>
        <NavLink to="tokens">Access tokens</NavLink>
      </nav>
      <Routes>
        <Route index element={<Navigate to="exports" replace />} />
        <Route path="exports" element={<Exports />} />
        <Route path="finetune" element={<FineTuning />} />
        <Route path="finetune/:jobId" element={<FineTuneJobPage />} />
        <Route path="models" element={<ModelVersions />} />
        <Route path="models/:versionId" element={<ModelVersionPage />} />
        <Route path="rollouts" element={<Rollouts paths={ROLLOUT_PATHS} />} />
        <Route path="rollouts/:batchId" element={<RolloutBatchPage paths={ROLLOUT_PATHS} />} />
        <Route path="episodes/:episodeId" element={<EpisodeViewer back={backToBatch} batchPath={batchOf} />} />
        <Route path="tokens" element={<Tokens />} />
      </Routes>
    </ForRoles>
  );
}
