/** The projects a manager oversees, and the form that creates one. */
import { useState } from "react";
import { Link, useNavigate } from "react-router-dom";
import { api, type Page, type Project } from "../../api";
import { Button, ErrorBanner, Loading, Table, useApi, useMe, useSubmit } from "../../ui";
import "./manager.css";

interface DesktopTemplate {
  name: string;
  provider: string;
  image: string;
}

function CreateProject({ onCreated }: { onCreated: (p: Project) => void }) {
  const [name, setName] = useState("");
  const [platform, setPlatform] = useState("desktop");
  const [description, setDescription] = useState("");
  const [template, setTemplate] = useState("");
  const templates = useApi<DesktopTemplate[]>("/api/desktop-templates/");
  const { error, busy, dismiss, onSubmit } = useSubmit();
  const submit = onSubmit(async () => {
    onCreated(
      await api.post<Project>("/api/projects/", {
        name,
        platform,
        description,
        ...(template ? { environment_template: template } : {}),
      }),
    );
  });
  return (
    <form className="card" onSubmit={submit} aria-labelledby="create-project">
      <h2 id="create-project">New project</h2>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <div className="form-row">
        <label className="field">
          Name
          <input required value={name} onChange={(e) => setName(e.target.value)} maxLength={200} />
        </label>
        <label className="field">
          Platform
          <select value={platform} onChange={(e) => setPlatform(e.target.value)}>
            <option value="desktop">Desktop</option>
            <option value="web">Web</option>
            <option value="android">Android</option>
          </select>
        </label>
        <label className="field">
          Desktop
          <select value={template} onChange={(e) => setTemplate(e.target.value)} data-testid="new-project-desktop">
            <option value="">Tandem&apos;s default desktop</option>
            {(templates.data ?? []).map((t) => (
              <option key={t.name} value={t.name}>
                {t.name} ({t.provider === "local" ? "local desktop" : t.provider})
              </option>
            ))}
          </select>
        </label>
        <label className="field grow">
          Description
          <input value={description} onChange={(e) => setDescription(e.target.value)} />
        </label>
        <Button type="submit" variant="primary" disabled={busy || !name.trim()} disabledReason={busy ? "Creating…" : "Name the project first."}>
          Create project
        </Button>
      </div>
    </form>
  );
}

export function ProjectList() {
  const me = useMe();
  const navigate = useNavigate();
  const { data, error, loading } = useApi<Page<Project>>("/api/projects/?page_size=200");
  const overseen = (data?.results ?? []).filter((p) => ["manager", "reviewer", "admin"].includes(String(p.my_role)));
  return (
    <>
      <h1>Projects</h1>
      <ErrorBanner error={error} />
      {loading ? <Loading /> : null}
      {data ? (
        <Table
          caption="Projects you manage or review"
          rows={overseen}
          rowKey={(p) => p.id}
          empty="You do not manage any project yet."
          columns={[
            { header: "Project", cell: (p) => <Link to={`projects/${p.id}`}>{p.name}</Link> },
            { header: "Platform", cell: (p) => p.platform },
            { header: "Your role", cell: (p) => String(p.my_role) },
            { header: "Description", cell: (p) => String(p.description ?? "") },
          ]}
        />
      ) : null}
      {me.is_superuser || me.can_create_projects ? (
        <CreateProject onCreated={(p) => navigate(`projects/${p.id}/board`)} />
      ) : null}
    </>
  );
}
