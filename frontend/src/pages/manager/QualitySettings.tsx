/** A project's quality settings (overlap, honeypot rate, gold threshold, immediate feedback)
 * and its honeypots: the gold tasks handed out again, their runs and how they were scored. */
import { useEffect, useState } from "react";
import { api, type Project } from "../../api";
import { Button, ErrorBanner, Loading, NumberField, useApi, useSubmit } from "../../ui";

interface Settings {
  overlap: number;
  honeypot_rate: number;
  gold_threshold: number | null;
  immediate_feedback: boolean;
}

export function QualitySettings({ projectId }: { projectId: string }) {
  const { data, error, reload } = useApi<Project & Settings>(`/api/projects/${projectId}/`);
  const [overlap, setOverlap] = useState("1");
  const [rate, setRate] = useState("0");
  const [threshold, setThreshold] = useState("");
  const [feedback, setFeedback] = useState(false);
  const [saved, setSaved] = useState(false);
  const submit = useSubmit();
  useEffect(() => {
    if (!data) return;
    setOverlap(String(data.overlap));
    setRate(String(Math.round(data.honeypot_rate * 100)));
    setThreshold(data.gold_threshold === null ? "" : String(data.gold_threshold));
    setFeedback(data.immediate_feedback);
  }, [data]);
  if (!data) return error ? <ErrorBanner error={error} /> : <Loading />;
  const save = submit.onSubmit(async () => {
    setSaved(false);
    await api.patch(`/api/projects/${projectId}/`, {
      overlap: Number(overlap),
      honeypot_rate: Number(rate) / 100,
      gold_threshold: threshold.trim() === "" ? null : Number(threshold),
      immediate_feedback: feedback,
    });
    setSaved(true);
    reload();
  });
  return (
    <form onSubmit={save} aria-labelledby="quality-settings-heading" data-testid="quality-settings">
      <h3 id="quality-settings-heading">Quality settings</h3>
      <div className="form-row">
        <NumberField id="overlap" label="Annotators per task (1–5)" value={overlap} onChange={setOverlap} />
        <NumberField id="honeypot-rate" label="Honeypots (% of claims, 0–50)" value={rate} onChange={setRate} />
        <NumberField
          id="gold-threshold"
          label="Gold accuracy below which work waits for review (0–1, empty: none)"
          value={threshold}
          onChange={setThreshold}
        />
        <label className="field">
          <span>
            <input type="checkbox" checked={feedback} onChange={(e) => setFeedback(e.target.checked)} /> Show the right
            answer after a gold miss
          </span>
        </label>
      </div>
      <ErrorBanner error={submit.error} onDismiss={submit.dismiss} />
      <Button type="submit" variant="primary" disabled={submit.busy}>
        Save quality settings
      </Button>
      {saved && <span role="status"> Saved.</span>}
    </form>
  );
}

interface HoneypotRow {
  task: number;
  external_id: string;
  episode: number;
  decoys: Record<string, unknown>;
  active: boolean;
  runs: number;
  gold_steps_scored: number;
  gold_steps_right: number;
}

export function Honeypots({ projectId }: { projectId: string }) {
  const { data, error, reload } = useApi<{ honeypots: HoneypotRow[] }>(`/api/projects/${projectId}/honeypots/`);
  const submit = useSubmit();
  const retire = (row: HoneypotRow) =>
    submit.run(async () => {
      await api.del(`/api/episodes/${row.episode}/honeypot/`);
      reload();
    });
  return (
    <section aria-labelledby="honeypots-heading">
      <h3 id="honeypots-heading">Honeypots</h3>
      <p className="hint">
        A honeypot is made from an episode with gold steps (<code>PUT /api/episodes/&#123;id&#125;/honeypot/</code>, with
        optional decoys); annotators cannot tell it from other tasks.
      </p>
      <ErrorBanner error={error ?? submit.error} onDismiss={submit.dismiss} />
      {!data ? (
        <Loading />
      ) : data.honeypots.length === 0 ? (
        <p className="empty">No honeypot in this project yet.</p>
      ) : (
        <table className="table" data-testid="honeypots">
          <thead>
            <tr>
              <th scope="col">Task</th>
              <th scope="col">Gold from episode</th>
              <th scope="col">Decoys</th>
              <th scope="col">Runs</th>
              <th scope="col">Gold steps right</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {data.honeypots.map((h) => (
              <tr key={h.task}>
                <td>{h.external_id}</td>
                <td>{h.episode}</td>
                <td>{Object.keys(h.decoys).length}</td>
                <td>{h.runs}</td>
                <td>{`${h.gold_steps_right} of ${h.gold_steps_scored}`}</td>
                <td>
                  {h.active ? (
                    <Button onClick={() => retire(h)} disabled={submit.busy} aria-label={`Retire honeypot ${h.external_id}`}>
                      Retire
                    </Button>
                  ) : (
                    "retired"
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
