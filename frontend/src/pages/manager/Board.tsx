/** The progress board: a column per task status with its count and latest tasks. */
import { Link } from "react-router-dom";
import { Button, ErrorBanner, Loading, useApi } from "../../ui";
import { STATUS_LABEL, when } from "../../ui/format";
import { taskSuccessCell } from "../../episode/evaluation";
import { TaskSupportBadges } from "./TaskSupportBadges";
import type { Board } from "../../domain/api";

export function ProgressBoard({ projectId }: { projectId: string }) {
  const { data, error, loading, reload } = useApi<Board>(`/api/projects/${projectId}/board/?limit=25`);
  return (
    <section aria-labelledby="board-heading">
      <div className="form-row">
        <h2 id="board-heading">Progress board {data ? `(${data.total} ${data.total === 1 ? "task" : "tasks"})` : null}</h2>
        <Button onClick={reload} disabled={loading} disabledReason="Loading…">
          Refresh
        </Button>
      </div>
      <ErrorBanner error={error} />
      {!data ? <Loading /> : null}
      {data ? (
        <div className="board" data-testid="board">
          {data.columns.map((column) => (
            <section key={column.status} className="board-column" aria-label={STATUS_LABEL[column.status]} data-status={column.status}>
              <h2>
                {STATUS_LABEL[column.status]} <span className="count">{column.count}</span>
              </h2>
              {column.tasks.map((task) => (
                <article key={task.id} className="board-card">
                  <div className="id">{task.external_id}</div>
                  <div>{task.instruction}</div>
                  <TaskSupportBadges task={task} />
                  <div className="who">
                    {task.assignee ? `${task.assignee} · ` : ""}
                    {when(task.updated_at)}
                  </div>
                  {task.episode ? (
                    <div>
                      <Link to={`/manage/episodes/${task.episode}`}>Episode {task.episode}</Link>
                      {task.evaluation_status ? (
                        <span className="board-success" data-testid={`board-success-${task.id}`}>
                          {" "}
                          · task success {taskSuccessCell(task).text}
                        </span>
                      ) : null}
                    </div>
                  ) : null}
                </article>
              ))}
              {column.count > column.tasks.length ? (
                <p className="board-more">and {column.count - column.tasks.length} more</p>
              ) : null}
            </section>
          ))}
        </div>
      ) : null}
    </section>
  );
}
