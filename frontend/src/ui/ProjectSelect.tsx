import type { Page, Project } from "../api";
import { useApi } from "./useApi";

/** The "Project" picker of the pages that show one project at a time; `anyLabel` adds a
 * first option (value "") for no project in particular. */
export function ProjectSelect({
  projects,
  value,
  onChange,
  anyLabel,
}: {
  projects: { id: number; name: string }[];
  value: string;
  onChange: (project: string) => void;
  anyLabel?: string;
}) {
  return (
    <label className="field">
      Project
      <select value={value} onChange={(e) => onChange(e.target.value)}>
        {anyLabel !== undefined ? <option value="">{anyLabel}</option> : null}
        {projects.map((p) => (
          <option key={p.id} value={p.id}>
            {p.name}
          </option>
        ))}
      </select>
    </label>
  );
}

/** The projects whose exports and model versions the user may read (as engineer, manager or
 * admin), and the one to show: `chosen` when it is one of them, else the first. */
export function useReadableProjects(chosen: string) {
  const projects = useApi<Page<Project>>("/api/projects/?page_size=200");
  const readable = (projects.data?.results ?? []).filter((p) => ["engineer", "manager", "admin"].includes(String(p.my_role)));
  const project = readable.some((p) => String(p.id) === chosen) ? chosen : readable[0] ? String(readable[0].id) : "";
  return { projects, readable, project };
}
