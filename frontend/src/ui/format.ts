/** How the manager pages write times, durations and labels. */

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  return new Date(iso).toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
}

export function seconds(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return `${(ms / 1000).toFixed(1)} s`;
}

export function percent(rate: number | null | undefined): string {
  if (rate === null || rate === undefined) return "—";
  return `${Math.round(rate * 100)}%`;
}

/** A count with its noun: "1 task", "2 tasks". */
export function counted(count: number, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : plural}`;
}

export const STATUS_LABEL: Record<string, string> = {
  queued: "Queued",
  assigned: "Assigned",
  in_progress: "In progress",
  submitted: "Submitted",
  reviewed: "Reviewed",
  rejected: "Rejected",
  gold: "Gold (honeypot)",
};

export const DECISION_LABEL: Record<string, string> = {
  accepted: "Accepted",
  corrected: "Corrected",
  error_kept: "Error kept",
  auto: "Run as proposed",
  without_proposal: "No valid proposal",
};

/** A model version as people read it: the CPU baseline records its tesseract version
 * (`ocr-5.3.0`), which says nothing of what proposed. */
export function versionLabel(name: string): string {
  const ocr = /^ocr-(.+)$/.exec(name);
  return ocr ? `baseline (OCR, tesseract ${ocr[1]})` : name;
}

/** Who ran an episode, as a list shows it: its annotator, or for a rollout the model that ran
 * it alone (the person who started the batch did not decide its steps). */
export function ranBy(episode: { annotator: string; mode?: string; model_version?: string }): string {
  return episode.mode === "autonomous" ? `rollout · ${versionLabel(episode.model_version || "model")}` : episode.annotator;
}
