/** The steps so far: each observation as a thumbnail with what was decided and done. */
import { useEffect, useRef } from "react";
import { describe } from "./actions";
import type { StepView } from "./episode";

const DECISION_LABEL: Record<string, string> = {
  accepted: "approved",
  corrected: "corrected",
  error_kept: "error kept",
  // A branch task's steps before the handed-over one: the rollout's, replayed on this desktop.
  auto: "replayed",
};

/** How the trajectory names a step's decision; every decision has a name. */
export function decisionLabel(decision: string): string {
  return DECISION_LABEL[decision] ?? decision.replace("_", " ");
}

export function Trajectory({ steps, current }: { steps: StepView[]; current: number | null }) {
  const list = useRef<HTMLOListElement>(null);
  // The newest step stays in view as the trajectory grows.
  useEffect(() => {
    list.current?.lastElementChild?.scrollIntoView({ block: "nearest" });
  }, [steps.length]);
  return (
    <nav className="trajectory" aria-label="Trajectory">
      <h2>Steps</h2>
      <ol ref={list}>
        {steps.map((s) => (
          <li key={s.step} className={s.step === current ? "current" : ""} data-testid={`trajectory-step-${s.step}`}>
            <a href={`/api/screenshots/${s.screenshot}/`} target="_blank" rel="noreferrer" title="Open the screenshot">
              <img src={`/api/screenshots/${s.screenshot}/`} alt={`Screen before step ${s.step}`} loading="lazy" />
            </a>
            <div className="step-caption">
              <span className="step-number">{s.step}</span>{" "}
              {s.decision ? (
                <span className={`badge badge-${s.decision}`}>{decisionLabel(s.decision)}</span>
              ) : (
                <span className="badge">open</span>
              )}
              {s.final_action ? <div className="step-action">{describe(s.final_action)}</div> : null}
            </div>
          </li>
        ))}
      </ol>
    </nav>
  );
}
