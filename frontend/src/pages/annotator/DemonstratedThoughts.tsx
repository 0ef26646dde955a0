/**
 * The thoughts of the steps you demonstrated: each step's screen with its action drawn on it,
 * and the thought you write for it (why this step, as the model should think it). A thought a
 * model drafted is marked until you approve or edit it.
 */
import { useEffect, useState } from "react";
import { api } from "../../api";
import { Button, ErrorBanner, Loading, useApi, useSubmit } from "../../ui";
import { ActionOverlay } from "../../episode/ActionOverlay";
import { describe } from "./actions";
import { demonstratedSteps, thoughtOf, thoughtsLeft } from "./demonstration";
import type { Episode, Step } from "../../domain/api";

const WIDTH = 480;

function StepThought({ episodeId, step, onSaved }: { episodeId: number; step: Step; onSaved: () => void }) {
  const thought = thoughtOf(step);
  const [text, setText] = useState(thought.text);
  const { error, busy, run, dismiss } = useSubmit();
  const [width, height] = step.screen_size;
  const shown = { width: WIDTH, height: Math.round((WIDTH * height) / width) };
  const save = (value: string) =>
    run(async () => {
      await api.put(`/api/episodes/${episodeId}/steps/${step.index}/thought/`, { thought: value });
      onSaved();
    });
  return (
    <li className="demonstrated-step" data-testid={`demonstrated-step-${step.index}`}>
      <div className="thumb" style={{ position: "relative", width: shown.width, height: shown.height }}>
        <img src={`/api/screenshots/${step.screenshot}/`} alt={`The screen before step ${step.index}`} width={shown.width} height={shown.height} />
        {step.final_action ? (
          <ActionOverlay action={step.final_action} screen={{ width, height }} box={{ left: 0, top: 0, ...shown }} kind="draft" />
        ) : null}
      </div>
      <div className="thought-editor">
        <p>
          <span className="step-number">Step {step.index}</span>{" "}
          <code>{step.final_action ? describe(step.final_action) : ""}</code>
        </p>
        {thought.draftedBy ? (
          <p className="drafted" data-testid="drafted-note">
            Drafted by {thought.draftedBy}: approve it or edit it.
          </p>
        ) : null}
        <label>
          Thought
          <textarea
            value={text}
            rows={3}
            onChange={(event) => setText(event.target.value)}
            data-testid={`thought-${step.index}`}
            placeholder="Why this step: what you saw and what you meant to do."
          />
        </label>
        <ErrorBanner error={error} onDismiss={dismiss} />
        <Button onClick={() => save(text)} disabled={busy || !text.trim() || (thought.approved && text === thought.text)} data-testid={`save-thought-${step.index}`}>
          {thought.draftedBy && text === thought.text ? "Approve the draft" : "Save thought"}
        </Button>
        {thought.approved && text === thought.text ? <span className="saved">saved</span> : null}
      </div>
    </li>
  );
}

const DRAFT_WAIT_MS = 90_000;

export function DemonstratedThoughts({ episodeId, refresh }: { episodeId: number; refresh: number }) {
  const { data, error, loading, reload } = useApi<Episode>(`/api/episodes/${episodeId}/?r=${refresh}`);
  const drafts = useSubmit();
  // Until when the drafts the model writes one step at a time are looked for.
  const [draftingUntil, setDraftingUntil] = useState<number | null>(null);
  const steps = demonstratedSteps(data?.steps ?? []);
  const unwritten = steps.filter((s) => !thoughtOf(s).text.trim()).length;
  useEffect(() => {
    if (draftingUntil === null) return;
    if (unwritten === 0 || Date.now() > draftingUntil) {
      setDraftingUntil(null);
      return;
    }
    const timer = window.setTimeout(reload, 2000);
    return () => window.clearTimeout(timer);
  }, [draftingUntil, unwritten, data, reload]);
  if (loading && !data) return <Loading label="Loading your demonstrated steps…" />;
  if (error) return <ErrorBanner error={error} />;
  if (steps.length === 0) return null;
  const left = thoughtsLeft(steps);
  const askForDrafts = () =>
    drafts.run(async () => {
      const { steps: waiting } = await api.post<{ steps: number }>(`/api/episodes/${episodeId}/draft-thoughts/`);
      if (waiting > 0) setDraftingUntil(Date.now() + DRAFT_WAIT_MS);
    });
  return (
    <section className="demonstrated" aria-label="Your demonstrated steps" data-testid="demonstrated-thoughts">
      <h2>Your demonstrated steps</h2>
      <p role="status" data-testid="thoughts-left">
        {left === 0 ? "Every step has your thought." : `${left} step${left === 1 ? "" : "s"} still need${left === 1 ? "s" : ""} your thought.`}
      </p>
      <ErrorBanner error={drafts.error} onDismiss={drafts.dismiss} />
      {unwritten > 0 ? (
        <p>
          <Button onClick={askForDrafts} disabled={drafts.busy || draftingUntil !== null} data-testid="draft-thoughts">
            {draftingUntil !== null ? "The model is drafting…" : "Draft the missing thoughts with the model"}
          </Button>{" "}
          <span className="meta">Each draft stays marked as the model&apos;s until you approve or edit it.</span>
        </p>
      ) : null}
      <ol>
        {steps.map((step) => (
          <StepThought key={`${step.index}-${step.revisions.length}`} episodeId={episodeId} step={step} onSaved={reload} />
        ))}
      </ol>
    </section>
  );
}
