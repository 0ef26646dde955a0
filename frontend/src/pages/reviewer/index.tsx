import { Route, Routes } from "react-router-dom";
import type { Page } from "../../api";
import { ErrorBanner, Loading, Table, useApi } from "../../ui";

interface EpisodeRow {
  id: number;
  task: number;
  outcome: string | null;
  started_at: string;
  [key: string]: unknown;
}

function EpisodeList() {
  const { data, error, loading } = useApi<Page<EpisodeRow>>("/api/episodes/");
  return (
    <>
      <h1>Episodes</h1>
      <ErrorBanner error={error} />
      {loading ? <Loading /> : null}
      {data ? (
        <Table
          rows={data.results}
          rowKey={(e) => e.id}
          columns={[
            { header: "Episode", cell: (e) => e.id },
            { header: "Task", cell: (e) => e.task },
            { header: "Outcome", cell: (e) => e.outcome ?? "running" },
            { header: "Started", cell: (e) => new Date(e.started_at).toLocaleString() },
          ]}
        />
      ) : null}
    </>
  );
}

/** The reviewer's pages. */
export function ReviewerRoutes() {
  return (
    <Routes>
      <Route index element={<EpisodeList />} />
    </Routes>
  );
}
