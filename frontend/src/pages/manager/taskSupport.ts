/** The badges that say, before anyone claims a task, what stands between it and a desktop. */
import type { TaskSupport } from "../../domain/api";

export interface SupportBadge {
  kind: "cannot-run" | "files-missing" | "programs-missing" | "passes-without-work" | "cannot-evaluate" | "check-failed";
  label: string;
  /** The whole story, for the tooltip: the reason, or every missing URL on its own line. */
  title: string;
}

export function supportBadges(task: TaskSupport): SupportBadge[] {
  const badges: SupportBadge[] = [];
  if (task.cannot_run) {
    badges.push({ kind: "cannot-run", label: `cannot run: ${task.cannot_run}`, title: task.cannot_run });
  }
  const missing = task.files_missing ?? [];
  if (missing.length > 0) {
    badges.push({
      kind: "files-missing",
      label: `files missing (${missing.length})`,
      title:
        "Not in the task-file cache yet: upload them with POST /api/task-files/ (one file) or " +
        `/api/task-files/archive/ (many; see the README's Task files):\n${missing.join("\n")}`,
    });
  }
  const programs = task.programs_missing ?? [];
  if (programs.length > 0) {
    badges.push({
      kind: "programs-missing",
      label: `not on this desktop: ${programs.join(", ")}`,
      title:
        `The task starts ${programs.join(", ")}, which the project's desktop does not have: choose the desktop ` +
        "its tasks need under Members and desktop (OSWorld tasks: the OSWorld desktop).",
    });
  }
  const check = task.evaluator_check;
  if (check?.status === "passes_without_work" && !check.cleared_at) {
    badges.push({
      kind: "passes-without-work",
      label: "passes without work",
      title:
        `Its evaluator ${check.reason} (checked right after the setup, nothing done). Its rollouts count in no ` +
        "dataset until a manager trusts the evaluator.",
    });
  } else if (check?.status === "cannot_evaluate") {
    badges.push({ kind: "cannot-evaluate", label: "cannot evaluate", title: check.reason });
  } else if (check?.status === "failed") {
    badges.push({ kind: "check-failed", label: "evaluator check failed", title: check.reason });
  }
  return badges;
}
