/**
 * Dataset exports of a project: the form that asks for one (kind, format, filters), the list
 * with each export's progress while it runs, its counts, and download links to its files.
 * Engineers create exports; managers see and download them (the server enforces both). The
 * project is chosen on the page, or fixed by the project page that shows its exports.
 */
import { useState } from "react";
import { useSearchParams } from "react-router-dom";
import { api, type Page } from "../../api";
import { Button, ErrorBanner, Loading, ProjectSelect, useApi, usePoll, useReadableProjects, useSubmit } from "../../ui";
import { when } from "../../ui/format";
import { filtersText } from "./exportFilters";

interface ExportFile {
  name: string;
  size: number;
  sha256: string;
}

interface DatasetExport {
  id: number;
  project: number;
  kind: "sft" | "dpo" | "ct";
  format: "trl" | "llama_factory";
  filters: Record<string, unknown>;
  status: "queued" | "running" | "succeeded" | "failed" | "cancelled";
  progress: number;
  counts: Record<string, unknown>;
  files?: ExportFile[];
  error: string;
  created_at: string;
  finished_at: string | null;
}

const KINDS = { sft: "SFT (corrected, reflective and demonstrated steps)", dpo: "DPO (error-correction and post-reflection pairs)", ct: "CT (failed or abandoned trajectories)" };
const FORMATS = { trl: "TRL / Hugging Face datasets (Parquet)", llama_factory: "LLaMA-Factory (sharegpt JSON)" };

function choices(labels: Record<string, string>) {
  return Object.entries(labels).map(([value, label]) => (
    <option key={value} value={value}>
      {label}
    </option>
  ));
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
}

function ExportForm({ project, onCreated }: { project: string; onCreated: () => void }) {
  const [kind, setKind] = useState("sft");
  const [format, setFormat] = useState("trl");
  const [dateFrom, setDateFrom] = useState("");
  const [dateTo, setDateTo] = useState("");
  const [modelVersion, setModelVersion] = useState("");
  const [reviewStatus, setReviewStatus] = useState("");
  const [annotator, setAnnotator] = useState("");
  // Only episodes their task's evaluator scored at least this (OSWorld tasks); "" keeps all.
  const [minTaskSuccess, setMinTaskSuccess] = useState("");
  // Only work of annotators this good on gold steps (or work agreeing with theirs), or who agree
  // with the others this often (annotation/quality/kept.py); "" keeps all.
  const [minGold, setMinGold] = useState("");
  const [minAgreement, setMinAgreement] = useState("");
  const [includeAccepted, setIncludeAccepted] = useState(false);
  // Fine-tuning refuses exports that may hold the held-out episodes kept for evaluation.
  const [excludeHeldOut, setExcludeHeldOut] = useState(true);
  const [dropNoEffect, setDropNoEffect] = useState(false);
  const [approvedThoughts, setApprovedThoughts] = useState(true);
  const [replayed, setReplayed] = useState(false);
  const { error, dismiss, onSubmit } = useSubmit();
  const submit = onSubmit(async () => {
    const filters: Record<string, unknown> = {
      include_accepted: includeAccepted,
      exclude_held_out: excludeHeldOut,
      drop_no_visible_effect: dropNoEffect,
      require_approved_thoughts: approvedThoughts,
      require_replay: replayed,
    };
    if (dateFrom) filters.date_from = dateFrom;
    if (dateTo) filters.date_to = dateTo;
    if (modelVersion) filters.model_version = modelVersion;
    if (reviewStatus) filters.review_status = reviewStatus;
    if (annotator) filters.annotator = annotator;
    if (minTaskSuccess) filters.min_task_success = Number(minTaskSuccess);
    if (minGold) filters.min_gold_accuracy = Number(minGold);
    if (minAgreement) filters.min_agreement = Number(minAgreement);
    await api.post("/api/exports/", { project: Number(project), kind, format, filters });
    onCreated();
  });
  return (
    <form className="card" onSubmit={submit} aria-labelledby="new-export">
      <h2 id="new-export">New dataset export</h2>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <div className="form-row">
        <label className="field">
          Kind
          <select value={kind} onChange={(e) => setKind(e.target.value)}>
            {choices(KINDS)}
          </select>
        </label>
        <label className="field">
          Format
          <select value={format} onChange={(e) => setFormat(e.target.value)}>
            {choices(FORMATS)}
          </select>
        </label>
      </div>
      <fieldset>
        <legend>Filters (all optional)</legend>
        <div className="form-row">
          <label className="field">
            From date
            <input type="date" value={dateFrom} onChange={(e) => setDateFrom(e.target.value)} />
          </label>
          <label className="field">
            To date
            <input type="date" value={dateTo} onChange={(e) => setDateTo(e.target.value)} />
          </label>
          <label className="field">
            Model version
            <input value={modelVersion} onChange={(e) => setModelVersion(e.target.value)} />
          </label>
          <label className="field">
            Review status
            <select value={reviewStatus} onChange={(e) => setReviewStatus(e.target.value)}>
              <option value="">Any</option>
              <option value="accepted">Accepted</option>
              <option value="rejected">Rejected</option>
              <option value="unreviewed">Not reviewed</option>
            </select>
          </label>
          <label className="field">
            Annotator
            <input value={annotator} onChange={(e) => setAnnotator(e.target.value)} />
          </label>
          <label className="field">
            Minimum task success (0–1)
            <input
              type="number"
              min={0}
              max={1}
              step={0.05}
              value={minTaskSuccess}
              placeholder="any, scored or not"
              onChange={(e) => setMinTaskSuccess(e.target.value)}
            />
          </label>
          <label className="field">
            Minimum annotator gold accuracy (0–1)
            <input
              type="number"
              min={0}
              max={1}
              step={0.05}
              value={minGold}
              placeholder="any annotator"
              onChange={(e) => setMinGold(e.target.value)}
            />
          </label>
          <label className="field">
            Minimum annotator agreement (0–1)
            <input
              type="number"
              min={0}
              max={1}
              step={0.05}
              value={minAgreement}
              placeholder="any annotator"
              onChange={(e) => setMinAgreement(e.target.value)}
            />
          </label>
          <label>
            <input type="checkbox" checked={includeAccepted} onChange={(e) => setIncludeAccepted(e.target.checked)} />{" "}
            Include accepted steps (SFT)
          </label>
          <label>
            <input type="checkbox" checked={excludeHeldOut} onChange={(e) => setExcludeHeldOut(e.target.checked)} />{" "}
            Leave out the evaluation split (needed for fine-tuning)
          </label>
          <label>
            <input type="checkbox" checked={dropNoEffect} onChange={(e) => setDropNoEffect(e.target.checked)} />{" "}
            Leave out steps with no visible effect (their action changed nothing it was meant to)
          </label>
          <label>
            <input type="checkbox" checked={approvedThoughts} onChange={(e) => setApprovedThoughts(e.target.checked)} />{" "}
            Demonstrations: only those whose every thought a person wrote or approved
          </label>
          <label>
            <input type="checkbox" checked={replayed} onChange={(e) => setReplayed(e.target.checked)} />{" "}
            Demonstrations: only those that replayed on a fresh desktop
          </label>
        </div>
      </fieldset>
      <Button type="submit" variant="primary">
        Start export
      </Button>
    </form>
  );
}

function ExportRow({ item, onChange }: { item: DatasetExport; onChange: () => void }) {
  const { error, dismiss, run } = useSubmit();
  const live = item.status === "queued" || item.status === "running";
  const cancel = () =>
    run(async () => {
      await api.post(`/api/exports/${item.id}/cancel/`);
      onChange();
    });
  return (
    <tr data-testid={`export-${item.id}`}>
      <td>{item.id}</td>
      <td>
        {item.kind.toUpperCase()} · {item.format}
      </td>
      <td title={JSON.stringify(item.filters)}>{filtersText(item.filters)}</td>
      <td>
        {item.status}
        {live ? (
          <>
            {" "}
            <progress className="progress" max={1} value={item.progress} aria-label={`Export ${item.id} progress`} />{" "}
            {Math.round(item.progress * 100)}%
          </>
        ) : null}
        {item.error ? <p className="warn">{item.error}</p> : null}
        <ErrorBanner error={error} onDismiss={dismiss} />
      </td>
      <td>
        {Object.entries(item.counts ?? {})
          .filter(([, v]) => typeof v === "number")
          .map(([k, v]) => `${k}: ${String(v)}`)
          .join(", ") || "—"}
      </td>
      <td>{when(item.created_at)}</td>
      <td>
        {(item.files ?? []).map((f) => (
          <div key={f.name}>
            <a href={`/api/exports/${item.id}/download/?file=${encodeURIComponent(f.name)}`} download>
              {f.name}
            </a>{" "}
            <span className="meta" title={`sha256 ${f.sha256}`}>
              ({size(f.size)})
            </span>
          </div>
        ))}
        {live ? (
          <Button variant="danger" onClick={cancel}>
            Cancel
          </Button>
        ) : null}
      </td>
    </tr>
  );
}

export function Exports({ project: fixed }: { project?: string }) {
  const [params, setParams] = useSearchParams();
  const { projects, readable, project } = useReadableProjects(fixed ?? params.get("project") ?? "");
  const list = useApi<Page<DatasetExport>>(project ? `/api/exports/?project=${project}&page_size=100` : null);
  const anyLive = (list.data?.results ?? []).some((e) => e.status === "queued" || e.status === "running");
  const { reload } = list;
  usePoll(reload, anyLive);
  const selected = readable.find((p) => String(p.id) === project);
  return (
    <>
      {fixed ? null : (
        <div className="form-row">
          <ProjectSelect projects={readable} value={project} onChange={(chosen) => setParams({ project: chosen })} />
        </div>
      )}
      <ErrorBanner error={projects.error} />
      {projects.data && readable.length === 0 ? <p className="empty">You are not an engineer or manager of any project.</p> : null}
      {selected && (selected.my_role === "engineer" || selected.my_role === "admin") ? (
        <ExportForm project={project} onCreated={reload} />
      ) : null}
      {project ? (
        <section className="card" aria-labelledby="exports-heading">
          <h2 id="exports-heading">Exports</h2>
          <ErrorBanner error={list.error} />
          {list.loading && !list.data ? <Loading /> : null}
          {list.data && list.data.results.length === 0 ? <p className="empty">No exports of this project yet.</p> : null}
          {list.data && list.data.results.length > 0 ? (
            <table className="table" data-testid="exports-table">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Dataset</th>
                  <th scope="col">Filters</th>
                  <th scope="col">Status</th>
                  <th scope="col">Counts</th>
                  <th scope="col">Asked</th>
                  <th scope="col">Files</th>
                </tr>
              </thead>
              <tbody>
                {list.data.results.map((item) => (
                  <ExportRow key={item.id} item={item} onChange={reload} />
                ))}
              </tbody>
            </table>
          ) : null}
        </section>
      ) : null}
    </>
  );
}
