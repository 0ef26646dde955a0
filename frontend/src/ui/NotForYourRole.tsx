import type { ReactNode } from "react";
import { Link } from "react-router-dom";
import { rolesOf, type Role } from "../api";
import { useMe } from "./me";

/** Shown in place of a page the user's role cannot use: the server would refuse its
 * controls, so none are offered. `forWhom` names the roles the page is for; `roles` are the
 * user's own (in the project, with `inProject`). */
export function NotForYourRole({ forWhom, roles, inProject }: { forWhom: string; roles: string[]; inProject?: boolean }) {
  const yours = roles.length === 0 ? "You have no role here." : `Your role${roles.length > 1 ? "s" : ""}${inProject ? " in this project" : ""}: ${roles.join(", ")}.`;
  return (
    <section className="card not-for-role" aria-labelledby="not-for-role" data-testid="not-for-role">
      <h2 id="not-for-role">This page is for {forWhom}.</h2>
      <p>
        {yours} <Link to="/">Your projects</Link> lead to the pages of your role.
      </p>
    </section>
  );
}

/** A section's pages for the users who work in one of `roles` somewhere; the others get the
 * section's heading and the notice. */
export function ForRoles({ roles, forWhom, title, children }: { roles: Role[]; forWhom: string; title: string; children: ReactNode }) {
  const mine = rolesOf(useMe());
  if (roles.some((role) => mine.has(role))) return <>{children}</>;
  return (
    <>
      <h1>{title}</h1>
      <NotForYourRole forWhom={forWhom} roles={[...mine]} />
    </>
  );
}
