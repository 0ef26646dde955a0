/** A project's members and its desktop, for its managers: who works in it with which role
 * (add by username or e-mail, change nothing by accident, remove), and which desktop its tasks
 * run on. Each empty state says what it means for the project. */
import { useState } from "react";
import { api, type Page, type Project } from "../../api";
import { Button, ErrorBanner, Loading, Table, useApi, useSubmit } from "../../ui";

interface Membership {
  id: number;
  project: number;
  username: string;
  role: string;
  created_at: string;
}

interface DesktopTemplate {
  name: string;
  provider: string;
  width: number;
  height: number;
  image: string;
  internet: boolean;
}

const ROLES: [string, string][] = [
  ["annotator", "Annotator — works the queue"],
  ["reviewer", "Reviewer — reviews episodes"],
  ["manager", "Manager — runs the project"],
  ["engineer", "ML engineer — exports and fine-tunes"],
];

function AddMember({ projectId, onAdded }: { projectId: string; onAdded: () => void }) {
  const [who, setWho] = useState("");
  const [role, setRole] = useState("annotator");
  const { error, busy, dismiss, onSubmit } = useSubmit();
  const submit = onSubmit(async () => {
    await api.post("/api/memberships/", { project: Number(projectId), username: who.trim(), role });
    setWho("");
    onAdded();
  });
  return (
    <form className="card" onSubmit={submit} aria-labelledby="add-member">
      <h2 id="add-member">Add a member</h2>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <div className="form-row">
        <label className="field grow">
          Username or e-mail
          <input required value={who} onChange={(e) => setWho(e.target.value)} maxLength={254} />
        </label>
        <label className="field">
          Role
          <select value={role} onChange={(e) => setRole(e.target.value)}>
            {ROLES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <Button type="submit" variant="primary" disabled={busy || !who.trim()} disabledReason={busy ? "Adding…" : "Give a username or an e-mail first."}>
          Add member
        </Button>
      </div>
    </form>
  );
}

function ProjectDesktop({ project, onSaved }: { project: Project; onSaved: () => void }) {
  const { data: templates, error: loadError } = useApi<DesktopTemplate[]>("/api/desktop-templates/");
  const current = String(project.environment_template ?? "");
  const [chosen, setChosen] = useState(current);
  const { error, busy, dismiss, onSubmit } = useSubmit();
  const submit = onSubmit(async () => {
    await api.patch(`/api/projects/${project.id}/`, { environment_template: chosen });
    onSaved();
  });
  if (loadError) return <ErrorBanner error={loadError} />;
  if (!templates) return <Loading />;
  return (
    <form className="card" onSubmit={submit} aria-labelledby="project-desktop">
      <h2 id="project-desktop">Desktop</h2>
      <p className="meta">
        The desktop every task of this project runs on. OSWorld tasks need a desktop with OSWorld's applications (the
        container desktop built from Tandem's desktop image); a local desktop runs this host's programs.
      </p>
      <ErrorBanner error={error} onDismiss={dismiss} />
      <div className="form-row">
        <label className="field grow">
          Desktop template
          <select value={chosen} onChange={(e) => setChosen(e.target.value)} data-testid="desktop-template">
            {templates.some((t) => t.name === current) ? null : <option value={current}>{current} (missing)</option>}
            {templates.map((t) => (
              <option key={t.name} value={t.name}>
                {t.name} — {t.provider === "local" ? "local desktop" : `${t.provider}${t.image ? ` ${t.image}` : ""}`},{" "}
                {t.width}×{t.height}
                {t.internet ? ", internet" : ""}
              </option>
            ))}
          </select>
        </label>
        <Button type="submit" variant="primary" disabled={busy || chosen === current} disabledReason={busy ? "Saving…" : "Choose another desktop first."}>
          Save desktop
        </Button>
      </div>
    </form>
  );
}

export function ProjectMembers({ project, onProjectChanged }: { project: Project; onProjectChanged: () => void }) {
  const path = `/api/memberships/?project=${project.id}&page_size=500`;
  const { data, error, loading, reload } = useApi<Page<Membership>>(path);
  const [removeError, setRemoveError] = useState<unknown>(null);
  const members = data?.results ?? [];
  const annotators = members.filter((m) => m.role === "annotator").length;
  const remove = async (membership: Membership) => {
    if (!window.confirm(`Remove ${membership.username} (${membership.role}) from ${project.name}?`)) return;
    try {
      await api.del(`/api/memberships/${membership.id}/`);
      setRemoveError(null);
      reload();
    } catch (failure) {
      setRemoveError(failure);
    }
  };
  return (
    <>
      <ProjectDesktop project={project} onSaved={onProjectChanged} />
      <ErrorBanner error={error ?? removeError} />
      {loading ? <Loading /> : null}
      {data ? (
        <>
          {annotators === 0 ? (
            <p className="warn" role="note" data-testid="no-annotators">
              This project has no annotator yet: nobody can work its tasks, and the Tasks tab has nobody to assign them
              to. Add annotators below.
            </p>
          ) : null}
          <Table
            caption="Members"
            rows={members}
            rowKey={(m) => m.id}
            empty="Nobody is a member of this project yet."
            columns={[
              { header: "User", cell: (m) => m.username },
              { header: "Role", cell: (m) => m.role },
              { header: "Since", cell: (m) => new Date(m.created_at).toLocaleDateString() },
              {
                header: "",
                cell: (m) => (
                  <Button onClick={() => void remove(m)} aria-label={`Remove ${m.username}`}>
                    Remove
                  </Button>
                ),
              },
            ]}
          />
        </>
      ) : null}
      <AddMember projectId={String(project.id)} onAdded={reload} />
    </>
  );
}
