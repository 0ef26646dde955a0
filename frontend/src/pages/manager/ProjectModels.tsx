/**
 * The model versions a project runs: version A proposes, an optional version B takes a share of
 * the episodes (an A/B split), chosen with `PUT /api/projects/{id}/model-versions/`; the
 * server's refusals (a version not served, B without A, A equal to B) are shown as it words
 * them. Below, each version's live acceptance rate next to its offline step success rate.
 */
import { useEffect, useState } from "react";
import { Link } from "react-router-dom";
import { api, type Page } from "../../api";
import { Button, ErrorBanner, Loading, useApi, useSubmit } from "../../ui";
import { VersionComparison } from "../engineer/VersionComparison";
import type { ModelVersion, ProjectVersions } from "../engineer/finetune";

export function ProjectModels({ projectId, manages }: { projectId: string; manages: boolean }) {
  const overview = useApi<ProjectVersions>(`/api/projects/${projectId}/model-versions/`);
  const versions = useApi<Page<ModelVersion>>("/api/model-versions/?page_size=200");
  const [a, setA] = useState("");
  const [b, setB] = useState("");
  const [share, setShare] = useState("50");
  const { error, dismiss, onSubmit } = useSubmit();
  const [saved, setSaved] = useState(false);
  const current = overview.data;
  useEffect(() => {
    if (!current) return;
    setA(current.model_version ?? "");
    setB(current.version_b ?? "");
    if (current.version_b) setShare(String(Math.round(current.version_b_share * 100)));
  }, [current]);
  const save = onSubmit(async () => {
    setSaved(false);
    await api.put(`/api/projects/${projectId}/model-versions/`, {
      model_version: a || null,
      version_b: b || null,
      version_b_share: b ? Number(share) / 100 : 0,
    });
    setSaved(true);
    overview.reload();
  });
  const options = versions.data?.results ?? [];
  const versionOptions = options.map((v) => (
    <option key={v.id} value={v.name}>
      {`${v.name} (${v.serving_status})`}
    </option>
  ));
  return (
    <section aria-labelledby="models-heading">
      <h2 id="models-heading">Model versions</h2>
      <ErrorBanner error={overview.error ?? versions.error} />
      {!current ? <Loading /> : null}
      {current && manages ? (
        <form className="card" onSubmit={save} aria-labelledby="choose-heading">
          <h3 id="choose-heading">Which version proposes</h3>
          <p className="meta">
            Only a version its endpoint serves can be chosen. Version B takes its share of the new episodes, chosen from the episode id;
            every proposal records its version, so the acceptance chart compares them.
          </p>
          <ErrorBanner error={error} onDismiss={dismiss} />
          <div className="form-row">
            <label className="field">
              Version A
              <select value={a} onChange={(e) => setA(e.target.value)}>
                <option value="">The project&apos;s own model settings</option>
                {versionOptions}
              </select>
            </label>
            <label className="field">
              Version B (optional)
              <select value={b} onChange={(e) => setB(e.target.value)}>
                <option value="">No A/B split</option>
                {versionOptions}
              </select>
            </label>
            <label className="field">
              Share of episodes for B (%)
              <input type="number" min={0} max={100} step={1} value={share} disabled={!b} onChange={(e) => setShare(e.target.value)} />
            </label>
            <Button type="submit" variant="primary">
              Save versions
            </Button>
          </div>
          {saved ? (
            <p className="ok-banner" role="status" data-testid="versions-saved">
              Saved: {current.model_version ?? "the project's own model settings"} proposes
              {current.version_b ? `, ${current.version_b} takes ${Math.round(current.version_b_share * 100)}% of new episodes` : ""}.
            </p>
          ) : null}
        </form>
      ) : null}
      {current ? (
        <div className="card">
          <VersionComparison
            overview={current}
            versions={options}
            caption={`Live acceptance over the last ${current.acceptance_window_days} days next to the latest offline evaluation`}
          />
          <p className="meta">
            The acceptance chart per version is under <Link to="../charts">Charts</Link>.
          </p>
        </div>
      ) : null}
    </section>
  );
}
