import { Route, Routes } from "react-router-dom";
import type { Page, Project } from "../../api";
import { ErrorBanner, Loading, Table, useApi } from "../../ui";

function ProjectList() {
  const { data, error, loading } = useApi<Page<Project>>("/api/projects/");
  return (
    <>
      <h1>Projects</h1>
      <ErrorBanner error={error} />
      {loading ? <Loading /> : null}
      {data ? (
        <Table
          rows={data.results}
          rowKey={(p) => p.id}
          columns={[
            { header: "Project", cell: (p) => p.name },
            { header: "Platform", cell: (p) => p.platform },
          ]}
        />
      ) : null}
    </>
  );
}

/** The project manager's pages. */
export function ManagerRoutes() {
  return (
    <Routes>
      <Route index element={<ProjectList />} />
    </Routes>
  );
}
