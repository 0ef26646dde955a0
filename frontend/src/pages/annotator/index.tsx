/** The annotator's pages: the queue (start or resume work, the tasks assigned to them, kept
 * current by live assignment notices) and the episode workspace. */
import { useCallback, useEffect, useRef, useState } from "react";
import { Route, Routes, useNavigate } from "react-router-dom";
import { api, type Page } from "../../api";
import { assignedText, isTasksAssigned, useNotices, type Notice } from "../../notices";
import { Button, ErrorBanner, Table, useApi, useMe } from "../../ui";
import { feedbackText, rateText, type Feedback, type Scorecard } from "../../domain/quality";
import { Workspace } from "./Workspace";

interface Started {
  episode: number;
  task: number;
  socket: string;
}

interface AssignedTask {
  id: number;
  project: number;
  external_id: string;
  instruction: string;
  priority: number;
}

interface RunningEpisode {
  id: number;
  task: number;
  paused_at: string | null;
  /** Until when a paused episode's task and desktop are kept. */
  kept_until?: string | null;
}

function Queue() {
  const me = useMe();
  const navigate = useNavigate();
  const [error, setError] = useState<unknown>(null);
  const [starting, setStarting] = useState<number | "any" | null>(null);
  const projects = me.memberships.filter((m) => m.role === "annotator");
  const projectName = new Map(me.memberships.map((m) => [m.project, m.project_name]));
  const assigned = useApi<Page<AssignedTask>>(
    `/api/tasks/?assignee__username=${encodeURIComponent(me.username)}&status=assigned&ordering=-priority,id&page_size=50`,
  );
  const running = useApi<Page<RunningEpisode>>(
    `/api/episodes/?annotator__username=${encodeURIComponent(me.username)}&ended_at__isnull=true`,
  );
  const paused = running.data?.results.find((e) => e.paused_at !== null) ?? null;
  const [notice, setNotice] = useState<string | null>(null);
  const reloadAssigned = assigned.reload;
  const live = useNotices(
    useCallback(
      (message: Notice) => {
        if (message.event === "quality_feedback") {
          setNotice("You have new feedback on your work: see “Your work there” below.");
          return;
        }
        if (!isTasksAssigned(message)) return;
        setNotice(assignedText(message));
        reloadAssigned();
      },
      [reloadAssigned],
    ),
  );
  // A notice sent while the socket was down is missed: read the list again on each reconnect.
  const connections = useRef(0);
  useEffect(() => {
    if (!live) return;
    connections.current += 1;
    if (connections.current > 1) reloadAssigned();
  }, [live, reloadAssigned]);

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
      <div role="status" aria-live="polite">
        {notice ? (
          <p className="ok-banner" data-testid="assignment-notice">
            {notice}
          </p>
        ) : null}
      </div>
      {paused ? (
        <div className="card" role="status" data-testid="paused-episode">
          <p>
            <strong>Your episode is paused</strong> since {new Date(paused.paused_at as string).toLocaleTimeString()}:
            you were away, so its task and desktop are kept for you
            {paused.kept_until ? ` until ${new Date(paused.kept_until).toLocaleTimeString()}` : " for a while"}.
            Nothing you decided is lost.
          </p>
          <Button variant="primary" onClick={() => navigate(`/annotate/episodes/${paused.id}`)}>
            Resume
          </Button>
        </div>
      ) : null}
      <Button variant={paused ? "secondary" : "primary"} onClick={() => start()} disabled={starting !== null} disabledReason="Starting an episode…">
        {starting === "any" ? "Preparing a desktop…" : "Start next task"}
      </Button>
      <section className="card" aria-labelledby="assigned-heading" data-live={live}>
        <h2 id="assigned-heading">
          Assigned to you{assigned.data ? ` (${assigned.data.count})` : ""}
        </h2>
        <ErrorBanner error={assigned.error} />
        <Table
          rows={assigned.data?.results ?? []}
          rowKey={(t) => t.id}
          empty="No task is assigned to you now; starting work takes one from your projects' pools."
          columns={[
            { header: "Task", cell: (t) => t.external_id || `#${t.id}` },
            { header: "Instruction", cell: (t) => t.instruction },
            { header: "Project", cell: (t) => projectName.get(t.project) ?? `#${t.project}` },
            { header: "Priority", cell: (t) => t.priority },
          ]}
        />
      </section>
      <section className="card">
        <h2>Projects you annotate</h2>
        <Table
          rows={projects}
          rowKey={(m) => m.project}
          empty="You are not an annotator of any project."
          columns={[
            { header: "Project", cell: (m) => m.project_name },
            { header: "Your work there", cell: (m) => <MyWork project={m.project} /> },
            {
              header: "",
              cell: (m) => (
                <Button onClick={() => start(m.project)} disabled={starting !== null} disabledReason="Starting an episode…">
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

/** The annotator's own scorecard in a project, in a line (annotation/quality/scorecards.py),
 * and the feedback they were given there (annotation/quality/feedback.py), when the project
 * gives it. */
function MyWork({ project }: { project: number }) {
  const { data } = useApi<{ scorecard: Scorecard | null; feedback: Feedback[] }>(`/api/projects/${project}/scorecards/mine/`);
  const card = data?.scorecard;
  if (data === null) return <span className="meta">…</span>;
  if (!card) return <span className="meta">No finished episode yet.</span>;
  const reviewed = card.reviewed
    ? ` · reviews: ${rateText(card.review_acceptance, card.review_acceptance_low, card.review_acceptance_high, card.accepted, card.reviewed)}`
    : "";
  const gold = card.gold_steps
    ? ` · checked steps: ${rateText(card.gold_accuracy, card.gold_accuracy_low, card.gold_accuracy_high, card.gold_right, card.gold_steps)}`
    : "";
  return (
    <>
      <span data-testid={`my-work-${project}`}>
        {card.episodes} episodes · {card.decided_steps} steps decided · {card.demonstrated_steps} demonstrated{reviewed}
        {gold}
      </span>
      {data.feedback.length > 0 && (
        <details className="feedback">
          <summary>Feedback on your work ({data.feedback.length})</summary>
          <ul data-testid={`feedback-${project}`}>
            {data.feedback.map((f) => (
              <li key={`${f.kind}-${f.episode}-${f.step}-${f.at}`}>{feedbackText(f)}</li>
            ))}
          </ul>
        </details>
      )}
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
