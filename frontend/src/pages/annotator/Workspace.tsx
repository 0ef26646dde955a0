/**
 * The annotator's workspace for one episode: the task, the live desktop with the model's
 * proposal drawn on it, the decision (approve, correct, keep the error and reflect, finish,
 * call the user, abandon), and the trajectory so far. Everything frequent has a key.
 */
import { useCallback, useEffect, useRef, useState } from "react";
import { Link, useParams } from "react-router-dom";
import { Button, ErrorBanner, Loading } from "../../ui";
import { handedOverNote, replaySummary } from "../../episode/branch";
import { actionOf, describe, draftOf } from "./actions";
import type { Point } from "../../episode/coords";
import { CorrectionEditor } from "./CorrectionEditor";
import { DesktopView, type StreamState } from "../../episode/DesktopView";
import { clearDraft, loadDraft, saveDraft, worthKeeping } from "./drafts";
import { openEditor, stepOf, type EditorState } from "./editor";
import { isReflection, openStepOf, phaseOf, streamsDesktop, type Phase, type StepView } from "./episode";
import { decisionMs, useEpisodeSocket } from "./socket";
import { Trajectory } from "./Trajectory";
import { Driving } from "./Driving";
import { DemonstratedThoughts } from "./DemonstratedThoughts";
import type { DecideMessage, Evaluation } from "../../domain/socket";
import type { ActionType, Proposal } from "../../domain/actions";
import "./workspace.css";

const PHASE_LABEL: Record<Phase, string> = {
  connecting: "Connecting…",
  driving: "You are driving the desktop (recorded)",
  saving: "Saving your demonstration",
  preparing: "Preparing the desktop",
  thinking: "Model thinking",
  reproposing: "Your decision — the model is proposing for the newer screen",
  deciding: "Your decision",
  model_unavailable: "Model unavailable — write the step yourself",
  executing: "Executing",
  desktop_failed: "Desktop failed",
  ended: "Episode ended",
};

function EvaluationLine({ evaluation }: { evaluation: Evaluation }) {
  const text =
    evaluation.status === "pending"
      ? "The task's evaluator is scoring your episode…"
      : evaluation.status === "scored" && evaluation.task_success !== null
        ? `Task score: ${Math.round(evaluation.task_success * 100)}% (scored by the task's evaluator)`
        : "Not scored: the task's evaluator could not score this episode.";
  return (
    <p role="status" data-testid="task-score">
      {text}
    </p>
  );
}

const SHORTCUTS: [string, string][] = [
  ["Enter", "approve"],
  ["C", "correct (or click the desktop)"],
  ["K", "keep error & reflect"],
  ["F", "finish"],
  ["U", "call user"],
  ["Ctrl+Enter", "submit your step"],
  ["Esc", "cancel it"],
];

function isTyping(target: EventTarget | null): boolean {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function bestProposal(step: StepView | null): Proposal | null {
  return step?.proposals.find((p) => p.action !== null) ?? step?.proposals[0] ?? null;
}

export function Workspace() {
  const episodeId = Number(useParams().episodeId);
  const { view, connection, pending, decide, abandon } = useEpisodeSocket(episodeId);
  const [editor, setEditor] = useState<EditorState | null>(null);
  const [streamState, setStreamState] = useState<StreamState>("connecting");
  const autoOpened = useRef<number | null>(null);

  const phase = phaseOf(view);
  const open = openStepOf(view);
  const last = view.steps[view.steps.length - 1] ?? null;
  const proposal = bestProposal(open);
  const valid = proposal?.action ? proposal : null;
  const reflection = open ? isReflection(view, open.step) : false;
  const busy = pending !== null;
  const canDecide =
    open !== null && !busy && (phase === "deciding" || phase === "reproposing" || phase === "model_unavailable");

  // A new open step starts with no editor, or with the correction half-written for it before
  // a reload; a reflection or a step the model could not propose opens the editor by itself,
  // once.
  const openIndex = open?.step ?? null;
  useEffect(() => {
    const kept = openIndex !== null ? loadDraft(sessionStorage, episodeId, openIndex) : null;
    if (kept && openIndex !== null) autoOpened.current = openIndex;
    setEditor(kept);
  }, [episodeId, openIndex]);
  useEffect(() => {
    if (openIndex !== null) saveDraft(sessionStorage, episodeId, openIndex, editor);
  }, [episodeId, openIndex, editor]);
  const closeEditor = useCallback(() => {
    if (worthKeeping(editor) && !window.confirm("Discard your correction? What you wrote is lost.")) return;
    if (openIndex !== null) clearDraft(sessionStorage, episodeId, openIndex);
    setEditor(null);
  }, [editor, episodeId, openIndex]);
  useEffect(() => {
    if (!open || autoOpened.current === open.step) return;
    if (phase === "model_unavailable" || (phase === "deciding" && reflection)) {
      autoOpened.current = open.step;
      setEditor(openEditor(draftOf(valid?.action ?? null)));
    }
  }, [open, phase, reflection, valid]);

  const send = useCallback(
    (decision: DecideMessage["decision"], extra: Partial<DecideMessage>) => {
      if (!open) return;
      const started = open.proposedAt ?? Date.now();
      decide({
        type: "decide",
        step: open.step,
        decision,
        decision_ms: decisionMs(started),
        observation: open.screenshot,
        ...extra,
      });
    },
    [decide, open],
  );

  const approve = useCallback(() => {
    if (canDecide && valid) send("accepted", { proposal: valid.rank });
  }, [canDecide, valid, send]);

  const keepError = useCallback(() => {
    if (canDecide && valid && valid.action && !["finished", "call_user"].includes(valid.action.type)) {
      send("error_kept", { proposal: valid.rank });
    }
  }, [canDecide, valid, send]);

  const startEditor = useCallback(
    (type?: ActionType, point?: Point) => {
      if (!canDecide) return;
      const draft = draftOf(type && type !== valid?.action?.type ? { type } : valid?.action);
      // A click on the desktop starts the correction there; a drag then waits for its end.
      const dragFromHere = point !== undefined && draft.type === "drag";
      if (point) draft.point = [point.x, point.y];
      if (dragFromHere) draft.end = null;
      // The thought starts empty, even for a plain correction: the model's is only a hint.
      setEditor(openEditor(draft, dragFromHere));
    },
    [canDecide, valid],
  );

  const submitEditor = useCallback(() => {
    if (!editor || !canDecide) return;
    const step = stepOf(editor);
    if (typeof step === "string") return;
    // The correction names the model output it replaces; a step the model could not propose
    // replaces nothing.
    const replaced = proposal && !open?.modelUnavailable ? { proposal: proposal.rank } : {};
    send("corrected", { ...step, ...replaced });
    if (openIndex !== null) clearDraft(sessionStorage, episodeId, openIndex);
  }, [editor, canDecide, send, proposal, open, episodeId, openIndex]);

  const pick = useCallback(
    (pixel: Point) => {
      if (!canDecide) return;
      if (!editor) {
        startEditor(valid?.action?.type === "drag" || valid?.action?.type === "scroll" ? valid.action.type : "click", pixel);
        return;
      }
      const at: [number, number] = [pixel.x, pixel.y];
      const needsTwo = editor.draft.type === "drag";
      if (needsTwo && editor.pickEnd) {
        setEditor({ ...editor, draft: { ...editor.draft, end: at }, pickEnd: false });
      } else {
        setEditor({ ...editor, draft: { ...editor.draft, point: at, end: needsTwo ? null : editor.draft.end }, pickEnd: needsTwo });
      }
    },
    [canDecide, editor, startEditor, valid],
  );

  const confirmAbandon = useCallback(() => {
    if (window.confirm("Abandon this episode? The task goes back to the queue.")) abandon();
  }, [abandon]);

  useEffect(() => {
    function onKey(event: KeyboardEvent) {
      if (phase === "driving") return; // the keys are the person's input to the desktop
      if (editor) {
        if (event.key === "Escape") {
          event.preventDefault();
          closeEditor();
        } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          submitEditor();
        }
        return;
      }
      if (isTyping(event.target) || event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.key === "Enter") {
        if (event.target instanceof HTMLButtonElement || event.target instanceof HTMLAnchorElement) return;
        event.preventDefault();
        approve();
        return;
      }
      const key = event.key.toLowerCase();
      if (key === "c") startEditor();
      else if (key === "k") keepError();
      else if (key === "f") startEditor("finished");
      else if (key === "u") startEditor("call_user");
      else return;
      event.preventDefault();
    }
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [phase, editor, submitEditor, approve, startEditor, keepError, closeEditor]);

  if (!Number.isFinite(episodeId)) return <ErrorBanner error="There is no such episode." />;

  const screen = last ? { width: last.screen[0], height: last.screen[1] } : null;
  const draftAction = editor ? actionOf(editor.draft) : null;
  const draft = draftAction && typeof draftAction !== "string" ? draftAction : null;
  const streamed = open ? Object.values(open.streaming).join("\n—\n") : "";

  return (
    <div className="workspace" data-phase={phase}>
      <section className="task-bar" aria-label="Task">
        <div className="instruction">
          <span className="label">Task</span> {view.task?.instruction ?? "…"}
        </div>
        {view.branch ? (
          <p className="branch-note" data-testid="branch-note">
            <strong>This task goes on from a rollout&apos;s first wrong step.</strong> {replaySummary(view.branch)}
            {open?.step === view.branch.step ? handedOverNote(view.branch) : ""}
          </p>
        ) : null}
        <div className="task-meta">
          <span>
            Step {last?.step ?? 0} / {view.task?.max_steps ?? "?"}
          </span>
          <span className={`phase phase-${phase}`} role="status" aria-live="polite" data-testid="phase">
            {PHASE_LABEL[phase]}
            {phase === "thinking" || phase === "executing" || phase === "preparing" ? <span className="spinner" aria-hidden="true" /> : null}
          </span>
          {connection !== "open" && connection !== "closed" ? (
            <span className="connection" role="status">
              {connection === "connecting" ? "connecting…" : "connection lost: reconnecting…"}
            </span>
          ) : null}
        </div>
      </section>

      <Trajectory steps={view.steps} current={open?.step ?? null} />

      <section className="desktop-column" aria-label="Desktop">
        {view.episode === null ? (
          <Loading label="Connecting to the episode…" />
        ) : phase === "ended" && view.steps.some((s) => s.decision === "demonstrated") ? (
          // The desktop is gone; what is left to do is the thought of each demonstrated step.
          <DemonstratedThoughts episodeId={episodeId} refresh={view.steps.length} />
        ) : (
          <DesktopView
            episode={episodeId}
            streaming={streamsDesktop(view)}
            screen={screen}
            screenshotUrl={last ? `/api/screenshots/${last.screenshot}/` : null}
            proposal={phase === "deciding" ? (valid?.action ?? null) : null}
            draft={draft}
            picking={canDecide}
            onPick={pick}
            onStreamState={setStreamState}
            control={phase === "driving"}
          />
        )}
        <p className="desktop-legend">
          {canDecide ? "Click on the desktop to correct the step at that point." : " "}
          <span className="stream-state" data-testid="stream-state">
            stream: {streamState}
          </span>
        </p>
      </section>

      <aside className="decision-panel" aria-label="Decision">
        <ErrorBanner error={view.error ? `${view.error.message}` : null} />
        {phase === "connecting" ? <Loading label="Loading the episode…" /> : null}
        {phase === "preparing" ? <Loading label="Preparing the desktop: running the task's setup…" /> : null}
        {phase === "thinking" ? (
          <div className="thinking">
            <Loading label="The model is thinking…" />
            {streamed ? <pre className="streamed" data-testid="streamed">{streamed}</pre> : null}
          </div>
        ) : null}
        {phase === "executing" ? <Loading label="Executing the step and waiting for the screen to settle…" /> : null}
        {phase === "desktop_failed" ? (
          <div className="alert" role="alert">
            <strong>The desktop failed:</strong> {view.desktopFailed}. Nothing you decided is lost; abandon
            the episode to give the task back.
          </div>
        ) : null}
        {phase === "model_unavailable" && open ? (
          <div className="alert" role="alert">
            <strong>The model is unavailable</strong> ({open.modelUnavailable}). Write this step yourself.
          </div>
        ) : null}
        <Driving episodeId={episodeId} view={view} phase={phase} />
        {phase === "ended" ? (
          <div className="ended" role="status">
            <h2>Episode ended: {view.outcome?.replace("_", " ")}</h2>
            {view.endReason ? <p>{view.endReason}</p> : null}
            {view.evaluation ? <EvaluationLine evaluation={view.evaluation} /> : null}
            <Link to="/annotate" className="btn btn-primary">
              Back to your queue
            </Link>
          </div>
        ) : null}

        {open && phase === "deciding" && proposal ? (
          <section className="proposal" aria-label="The model's proposal" data-testid="proposal">
            {reflection ? (
              <p className="reflection-note">
                <strong>Reflection step.</strong> The last action was kept as an error: write the step that
                notices and recovers from it.
              </p>
            ) : null}
            {open && (open.reobserved ?? 0) > 0 ? (
              <p className="reflection-note" data-testid="reobserved-note">
                The screen changed after the last action: this is the newer screen, and the model
                proposed again for it.
              </p>
            ) : null}
            <h2>Model proposes</h2>
            <p className="thought" data-testid="proposal-thought">{proposal.thought || <em>(no thought)</em>}</p>
            <p className="action-line">
              <span className="label">Action</span>{" "}
              <code data-testid="proposal-action">{proposal.action ? describe(proposal.action) : "invalid"}</code>
            </p>
            {proposal.invalid_reason ? (
              <p className="invalid" role="alert">
                Invalid proposal: {proposal.invalid_reason}. Correct it.
              </p>
            ) : null}
            <p className="model-name">
              {proposal.model_name}
              {proposal.model_version && proposal.model_version !== proposal.model_name ? ` ${proposal.model_version}` : ""}
              {proposal.latency_ms !== null ? ` · ${(proposal.latency_ms / 1000).toFixed(1)} s` : ""}
            </p>
          </section>
        ) : null}

        {editor && open ? (
          <CorrectionEditor
            screen={{ width: open.screen[0], height: open.screen[1] }}
            editor={editor}
            onChange={setEditor}
            onSubmit={submitEditor}
            onCancel={closeEditor}
            busy={busy}
            modelThought={valid?.thought ?? null}
            title={reflection ? "Your reflective step" : phase === "model_unavailable" ? "Your step" : "Your correction"}
          />
        ) : null}

        {open && phase === "reproposing" ? (
          <p className="reflection-note" role="status" data-testid="reproposing-note">
            The screen changed after the last action: the model is proposing again for the newer screen.
            You can correct, finish or call the user meanwhile; approving waits for its proposal.
          </p>
        ) : null}
        {open && !editor && (phase === "deciding" || phase === "reproposing" || phase === "model_unavailable") ? (
          <div className="decision-buttons">
            <Button
              variant="primary"
              onClick={approve}
              disabled={!canDecide || !valid}
              disabledReason={
                busy
                  ? undefined
                  : phase === "reproposing"
                    ? "The model is proposing for the newer screen: approve its proposal once it comes."
                    : "The proposal has no valid action to approve: correct it."
              }
              aria-describedby={busy ? "decision-pending" : undefined}
              shortcut="Enter"
            >
              Approve
            </Button>
            <Button onClick={() => startEditor()} disabled={!canDecide} aria-describedby={busy ? "decision-pending" : undefined} shortcut="C">
              Correct
            </Button>
            <Button
              onClick={keepError}
              disabled={!canDecide || !valid || ["finished", "call_user"].includes(valid.action?.type ?? "")}
              aria-describedby={busy ? "decision-pending" : undefined}
              disabledReason={
                busy
                  ? undefined
                  : valid
                    ? "Ending the episode is not an error to keep."
                    : "There is no valid action to keep."
              }
              shortcut="K"
            >
              Keep error &amp; reflect
            </Button>
            <Button onClick={() => startEditor("finished")} disabled={!canDecide} aria-describedby={busy ? "decision-pending" : undefined} shortcut="F">
              Finish
            </Button>
            <Button onClick={() => startEditor("call_user")} disabled={!canDecide} aria-describedby={busy ? "decision-pending" : undefined} shortcut="U">
              Call user
            </Button>
          </div>
        ) : null}
        {busy ? (
          <p className="pending" role="status" id="decision-pending">
            Sending your decision for step {pending?.step}…
          </p>
        ) : null}
        {!view.ended && view.episode !== null ? (
          <Button variant="danger" className="abandon" onClick={confirmAbandon}>
            Abandon episode
          </Button>
        ) : null}

        <details className="shortcuts" open>
          <summary>Keyboard shortcuts</summary>
          <dl>
            {SHORTCUTS.map(([key, what]) => (
              <div key={key}>
                <dt>
                  <kbd>{key}</kbd>
                </dt>
                <dd>{what}</dd>
              </div>
            ))}
          </dl>
        </details>
      </aside>
    </div>
  );
}
