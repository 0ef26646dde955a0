/**
 * Driving the desktop yourself: take over the open step from the model, then hand back or
 * finish. While you drive, every input goes through the platform's recording gate and becomes
 * the steps; no keyboard shortcut of the workspace is active (your keys go to the desktop).
 */
import { api } from "../../api";
import { Button, ErrorBanner, Loading, useSubmit } from "../../ui";
import { drivingChoices } from "./demonstration";
import type { EpisodeView, Phase } from "./episode";

export function Driving({ episodeId, view, phase }: { episodeId: number; view: EpisodeView; phase: Phase }) {
  const { error, busy, run, dismiss } = useSubmit();
  const choices = drivingChoices(view, phase);
  const post = (what: string) => run(async () => void (await api.post(`/api/episodes/${episodeId}/${what}/`)));
  if (phase === "saving") return <Loading label="Saving what you did as steps…" />;
  if (!choices.takeOver && !choices.handBack && !choices.finish) return null;
  return (
    <section className="driving" aria-label="Drive the desktop" data-testid="driving">
      <ErrorBanner error={error} onDismiss={dismiss} />
      {phase === "driving" ? (
        <p className="driving-note" role="status" data-testid="driving-note">
          <strong>You are driving the desktop.</strong> Work as you would on your own computer: every
          click, scroll and key is recorded, with the screen before it, as the steps of this
          task. {view.demonstration ? "Finish when the task is done." : "Hand back to let the model go on from here."}
        </p>
      ) : null}
      <div className="decision-buttons">
        {choices.takeOver ? (
          <Button onClick={() => post("take-over")} disabled={busy} data-testid="take-over">
            Take over (drive it yourself)
          </Button>
        ) : null}
        {choices.handBack ? (
          <Button variant="primary" onClick={() => post("hand-back")} disabled={busy} data-testid="hand-back">
            Hand back to the model
          </Button>
        ) : null}
        {choices.finish ? (
          <Button
            variant={choices.handBack ? "secondary" : "primary"}
            onClick={() => post("finish-demonstration")}
            disabled={busy}
            data-testid="finish-demonstration"
          >
            Task done: finish
          </Button>
        ) : null}
      </div>
    </section>
  );
}
