import { Link } from "react-router-dom";
import type { Role } from "../api";
import { Table, useMe } from "../ui";

/** Where each role works on a project: the project's own page where the role has one. */
const WORK: Record<Role, { path: (project: number) => string; label: string }> = {
  annotator: { path: () => "/annotate", label: "Work the queue" },
  reviewer: { path: (project) => `/review?project=${project}`, label: "Review episodes" },
  manager: { path: (project) => `/manage/projects/${project}/board`, label: "Manage the project" },
  engineer: { path: (project) => `/engineer/exports?project=${project}`, label: "Datasets and models" },
};

/** The signed-in landing page: the user's projects, their role in each, where to go. */
export function Home() {
  const me = useMe();
  return (
    <>
      <h1>Welcome, {me.first_name || me.username}</h1>
      <section className="card">
        <h2>Your projects</h2>
        <Table
          rows={me.memberships}
          rowKey={(m) => `${m.project}-${m.role}`}
          empty="You are not a member of any project yet. Ask a project manager to add you."
          columns={[
            { header: "Project", cell: (m) => m.project_name },
            { header: "Your role", cell: (m) => m.role },
            { header: "", cell: (m) => <Link to={WORK[m.role].path(m.project)}>{WORK[m.role].label}</Link> },
          ]}
        />
      </section>
    </>
  );
}
