/** A task's "cannot run" and "files missing" badges (see taskSupport.ts). */
import { supportBadges } from "./taskSupport";
import type { TaskSupport } from "../../domain/api";

export function TaskSupportBadges({ task }: { task: TaskSupport }) {
  const badges = supportBadges(task);
  if (badges.length === 0) return null;
  return (
    <div className="support-badges">
      {badges.map((badge) => (
        <span key={badge.kind} className={`badge badge-${badge.kind}`} title={badge.title} data-testid={badge.kind}>
          {badge.label}
        </span>
      ))}
    </div>
  );
}
