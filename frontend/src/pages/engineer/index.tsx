/** The ML engineer's pages: dataset exports, fine-tuning jobs, model versions and personal
 * access tokens. Managers reach the exports, jobs and versions of their projects from the
 * project page and read them here. */
import { NavLink, Navigate, Route, Routes } from "react-router-dom";
import { Exports } from "./Exports";
import { FineTuneJobPage } from "./FineTuneJobPage";
import { FineTuning } from "./FineTuning";
import { ModelVersionPage } from "./ModelVersionPage";
import { ModelVersions } from "./ModelVersions";
import { Tokens } from "./Tokens";
import "../manager/manager.css";

export function EngineerRoutes() {
  return (
    <>
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
    </>
  );
}
