import { Link } from "react-router-dom";
import type { Role } from "../api";
import { Table, useMe } from "../ui";

const WORK: Record<Role, { path: string; label: string }> = {
  annotator: { path: "/annotate", label: "Work the queue" },
  reviewer: { path: "/review", label: "Review episodes" },
  manager: { path: "/manage", label: "Manage the project" },
  engineer: { path: "/engineer", label: "Datasets and models" },
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
            { header: "", cell: (m) => <Link to={WORK[m.role].path}>{WORK[m.role].label}</Link> },
          ]}
        />
      </section>
    </>
  );
}
