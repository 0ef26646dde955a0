/** A project's episodes, newest first; running ones can be watched live (view-only). */
import { useState } from "react";
import { Link } from "react-router-dom";
import type { Page } from "../../api";
import { Button, ErrorBanner, Loading, Pager, Table, useApi } from "../../ui";
import { TaskSuccess } from "../../episode/Evaluation";
import { ranBy, when } from "../../ui/format";
import type { EpisodeSummary } from "../../domain/api";

export function EpisodeList({ projectId }: { projectId: string }) {
  const [running, setRunning] = useState(false);
  const [page, setPage] = useState(1);
  const { data, error, loading, reload } = useApi<Page<EpisodeSummary>>(
    `/api/episodes/?task__project=${projectId}&page=${page}&page_size=50`,
  );
  const rows = (data?.results ?? []).filter((e) => !running || e.ended_at === null);
  return (
    <section aria-labelledby="episodes-heading">
      <div className="form-row">
        <h2 id="episodes-heading">Episodes {data ? `(${data.count})` : null}</h2>
        <label>
          <input type="checkbox" checked={running} onChange={(e) => setRunning(e.target.checked)} /> Only running episodes
          (live)
        </label>
        <Button onClick={reload} disabled={loading} disabledReason="Loading…">
          Refresh
        </Button>
      </div>
      <ErrorBanner error={error} />
      {!data ? <Loading /> : null}
      {data ? (
        <Table
          rows={rows}
          rowKey={(e) => e.id}
          empty={running ? "No episode is running now." : "No episodes yet."}
          columns={[
            { header: "Episode", cell: (e) => <Link to={`/manage/episodes/${e.id}`}>Episode {e.id}</Link> },
            {
              header: "Task",
              cell: (e) => (
                <>
                  {e.instruction}
                  <div className="meta">{e.task_external_id}</div>
                </>
              ),
            },
            { header: "Annotator", cell: (e) => ranBy(e) },
            { header: "Model version", cell: (e) => e.model_version || "—" },
            { header: "Steps", cell: (e) => e.step_count },
            { header: "Started", cell: (e) => when(e.started_at) },
            {
              header: "Outcome",
              cell: (e) =>
                e.ended_at === null ? (
                  <Link to={`/manage/episodes/${e.id}`}>Running — watch live</Link>
                ) : (
                  e.outcome
                ),
            },
            { header: "Task success", cell: (e) => <TaskSuccess episode={e} /> },
          ]}
        />
      ) : null}
      <Pager page={page} data={data} onChange={setPage} />
    </section>
  );
}
