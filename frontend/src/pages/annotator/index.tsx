/** The annotator's pages: the queue (start or resume work) and the episode workspace. */
import { useState } from "react";
import { Route, Routes, useNavigate } from "react-router-dom";
import { api } from "../../api";
import { Button, ErrorBanner, Table, useMe } from "../../ui";
import { Workspace } from "./Workspace";

interface Started {
  episode: number;
  task: number;
  socket: string;
}

function Queue() {
  const me = useMe();
  const navigate = useNavigate();
  const [error, setError] = useState<unknown>(null);
  const [starting, setStarting] = useState<number | "any" | null>(null);
  const projects = me.memberships.filter((m) => m.role === "annotator");

  async function start(project?: number) {
    setStarting(project ?? "any");
    setError(null);
    try {
      const started = await api.post<Started>("/api/episodes/start/", project ? { project } : {});
      navigate(`/annotate/episodes/${started.episode}`);
    } catch (cause) {
      setError(cause);
      setStarting(null);
    }
  }

  return (
    <>
      <h1>Your queue</h1>
      <p>
        Starting work claims your next task (your own assigned tasks first, then the project&apos;s
        pool) and prepares a desktop for it. Claiming again resumes the task you hold.
      </p>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      <Button variant="primary" onClick={() => start()} disabled={starting !== null}>
        {starting === "any" ? "Preparing a desktop…" : "Start next task"}
      </Button>
      <section className="card">
        <h2>Projects you annotate</h2>
        <Table
          rows={projects}
          rowKey={(m) => m.project}
          empty="You are not an annotator of any project."
          columns={[
            { header: "Project", cell: (m) => m.project_name },
            {
              header: "",
              cell: (m) => (
                <Button onClick={() => start(m.project)} disabled={starting !== null}>
                  {starting === m.project ? "Preparing…" : "Start a task from this project"}
                </Button>
              ),
            },
          ]}
        />
      </section>
    </>
  );
}

export function AnnotatorRoutes() {
  return (
    <Routes>
      <Route index element={<Queue />} />
      <Route path="episodes/:episodeId" element={<Workspace />} />
    </Routes>
  );
}
