/** The ML engineer's pages: dataset exports and personal access tokens. */
import { NavLink, Navigate, Route, Routes } from "react-router-dom";
import { Exports } from "./Exports";
import { Tokens } from "./Tokens";
import "../manager/manager.css";

export function EngineerRoutes() {
  return (
    <>
      <h1>Datasets and access</h1>
      <nav className="tabs" aria-label="Engineer sections">
        <NavLink to="exports">Dataset exports</NavLink>
        <NavLink to="tokens">Access tokens</NavLink>
      </nav>
      <Routes>
        <Route index element={<Navigate to="exports" replace />} />
        <Route path="exports" element={<Exports />} />
        <Route path="tokens" element={<Tokens />} />
      </Routes>
    </>
  );
}
