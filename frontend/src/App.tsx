/**
 * The app shell: loads the signed-in user, shows the navigation their roles allow, and routes
 * to the pages of each role. Every permission is enforced on the server; the navigation only
 * hides what would be refused.
 */
import { NavLink, Route, Routes } from "react-router-dom";
import { cookie, rolesOf, type Me, type Role } from "./api";
import { AnnotatorRoutes } from "./pages/annotator";
import { EngineerRoutes } from "./pages/engineer";
import { ManagerRoutes } from "./pages/manager";
import { ReviewerRoutes } from "./pages/reviewer";
import { Home } from "./pages/Home";
import { ErrorBanner, Loading, MeContext, useApi } from "./ui";

// Managers review too (design §8), so the review queue is theirs as well.
const SECTIONS: { roles: Role[]; path: string; label: string }[] = [
  { roles: ["annotator"], path: "/annotate", label: "Annotate" },
  { roles: ["reviewer", "manager"], path: "/review", label: "Review" },
  { roles: ["manager"], path: "/manage", label: "Projects" },
  { roles: ["engineer"], path: "/engineer", label: "Datasets and models" },
];

export function App() {
  const { data: me, error } = useApi<Me>("/api/me/");
  if (error) return <ErrorBanner error={error} />;
  if (!me) return <Loading label="Signing in…" />;
  const roles = rolesOf(me);
  return (
    <MeContext.Provider value={me}>
      <header className="app-header">
        <NavLink to="/" className="brand" end>
          Tandem
        </NavLink>
        <nav aria-label="Main">
          {SECTIONS.filter((s) => s.roles.some((role) => roles.has(role))).map((s) => (
            <NavLink key={s.path} to={s.path}>
              {s.label}
            </NavLink>
          ))}
        </nav>
        <span className="grow" />
        <a href="/api/docs/">API docs</a>
        {me.is_superuser ? <a href="/admin/">Admin</a> : null}
        <span className="user">{me.username}</span>
        <form method="post" action="/accounts/logout/" className="inline">
          <input type="hidden" name="csrfmiddlewaretoken" value={cookie("csrftoken") ?? ""} />
          <button type="submit" className="btn btn-link">
            Sign out
          </button>
        </form>
      </header>
      <main className="app-main">
        <Routes>
          <Route path="/" element={<Home />} />
          <Route path="/annotate/*" element={<AnnotatorRoutes />} />
          <Route path="/review/*" element={<ReviewerRoutes />} />
          <Route path="/manage/*" element={<ManagerRoutes />} />
          <Route path="/engineer/*" element={<EngineerRoutes />} />
          <Route path="*" element={<p>There is no such page.</p>} />
        </Routes>
      </main>
    </MeContext.Provider>
  );
}
