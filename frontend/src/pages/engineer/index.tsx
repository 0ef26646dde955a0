/** The ML engineer's pages: dataset exports, fine-tuning jobs, model versions and personal
 * access tokens. Managers see the exports and jobs of their projects on the project page and
 * read them, and the versions, here too; other roles are told whom the pages are for. */
import { NavLink, Navigate, Route, Routes } from "react-router-dom";
import { ForRoles } from "../../ui";
import { Exports } from "./Exports";
import { FineTuneJobPage } from "./FineTuneJobPage";
import { FineTuning } from "./FineTuning";
import { ModelVersionPage } from "./ModelVersionPage";
import { ModelVersions } from "./ModelVersions";
import { Tokens } from "./Tokens";
import "../manager/manager.css";

export function EngineerRoutes() {
  return (
    <ForRoles roles={["engineer", "manager"]} forWhom="ML engineers and project managers" title="Datasets and models">
      <h1>Datasets and models</h1>
      <nav className="tabs" aria-label="Engineer sections">
        <NavLink to="exports">Dataset exports</NavLink>
        <NavLink to="finetune">Fine-tuning</NavLink>
        <NavLink to="models">Model versions</NavLink>
        <NavLink to="tokens">Access tokens</NavLink>
      </nav>
      <Routes>
        <Route index element={<Navigate to="exports" replace />} />
        <Route path="exports" element={<Exports />} />
        <Route path="finetune" element={<FineTuning />} />
        <Route path="finetune/:jobId" element={<FineTuneJobPage />} />
        <Route path="models" element={<ModelVersions />} />
        <Route path="models/:versionId" element={<ModelVersionPage />} />
        <Route path="tokens" element={<Tokens />} />
      </Routes>
    </ForRoles>
  );
}
