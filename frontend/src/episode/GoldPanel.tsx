/** The manager's gold editor on an ended episode's step: the step's gold answers, a target box
 * dragged on the screenshot (or typed), saved as the step's gold; and the episode made a
 * honeypot (annotation/quality/gold.py and honeypots.py say what the server checks). */
import { useState, type PointerEvent } from "react";
import { api } from "../api";
import { answerText, type Box, type GoldAnswer } from "../domain/quality";
import type { Episode, Step } from "../domain/api";
import { Button, ErrorBanner, useApi, useSubmit } from "../ui";
import { answerFor, boxFrom, screenPoint } from "./gold";

interface GoldSteps {
  steps: { step: number; answers: GoldAnswer[]; source: string }[];
}

export function GoldPanel({ episode, step }: { episode: Episode; step: Step }) {
  const { data, reload } = useApi<GoldSteps>(`/api/episodes/${episode.id}/gold/`);
  const [box, setBox] = useState<Box | null>(null);
  const [start, setStart] = useState<[number, number] | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const submit = useSubmit();
  const [w, h] = step.screen_size;
  const stored = data?.steps.find((g) => g.step === step.index) ?? null;
  const answer = answerFor(step.final_action, step.final_action?.point ? box : null);
  const pointer = (event: PointerEvent<SVGSVGElement>) =>
    screenPoint(event.clientX, event.clientY, event.currentTarget.getBoundingClientRect(), w, h);
  const save = () =>
    submit.run(async () => {
      await api.put(`/api/episodes/${episode.id}/gold/`, { steps: [{ step: step.index, answers: answer ? [answer] : [] }] });
      setDone(`Step ${step.index} is gold.`);
      reload();
    });
  const makeHoneypot = () =>
    submit.run(async () => {
      await api.put(`/api/episodes/${episode.id}/honeypot/`, {});
      setDone(`Task ${episode.task_external_id} is a honeypot now.`);
    });
  return (
    <section className="card gold-panel" aria-labelledby={`gold-${step.index}`} data-testid="gold-panel">
      <h3 id={`gold-${step.index}`}>Gold</h3>
      <p data-testid="gold-stored">
        {stored ? `Right at step ${step.index}: ${stored.answers.map(answerText).join("; or ")} (from ${stored.source})` : "This step is not gold."}
      </p>
      {step.final_action?.point ? (
        <>
          <p className="hint">Drag the target box on the screen: the final action must land inside it (dashed: the gold stored now).</p>
          <div className="shot-frame" style={{ aspectRatio: `${w} / ${h}` }}>
            <img src={`/api/screenshots/${step.screenshot}/`} alt={`Screen of step ${step.index}, to mark its target`} width={w} height={h} />
            <svg
              viewBox={`0 0 ${w} ${h}`}
              data-testid="gold-canvas"
              aria-hidden="true"
              style={{ cursor: "crosshair", touchAction: "none" }}
              onPointerDown={(e) => setStart(pointer(e))}
              onPointerMove={(e) => start && setBox(boxFrom(start, pointer(e), w, h))}
              onPointerUp={(e) => {
                if (start) setBox(boxFrom(start, pointer(e), w, h));
                setStart(null);
              }}
            >
              {(stored?.answers ?? []).map((a, i) =>
                a.region ? (
                  <rect key={i} x={a.region[0]} y={a.region[1]} width={a.region[2] - a.region[0]} height={a.region[3] - a.region[1]} fill="none" stroke="#b35900" strokeDasharray="8 5" strokeWidth={Math.max(2, w / 400)} />
                ) : null,
              )}
              {box ? <rect x={box[0]} y={box[1]} width={box[2] - box[0]} height={box[3] - box[1]} fill="rgba(23,107,44,.2)" stroke="#176b2c" strokeWidth={Math.max(2, w / 400)} /> : null}
            </svg>
          </div>
        </>
      ) : null}
      <p data-testid="gold-answer">{answer ? `Will save: ${answerText(answer)}` : "A step without a final action cannot be gold."}</p>
      <ErrorBanner error={submit.error} onDismiss={submit.dismiss} />
      <Button onClick={save} disabled={submit.busy || !answer}>
        Save as gold for step {step.index}
      </Button>{" "}
      <Button onClick={makeHoneypot} disabled={submit.busy || !data?.steps.length}>
        Make this task a honeypot
      </Button>
      {done ? <span role="status"> {done}</span> : null}
    </section>
  );
}
