import { describe, expect, it } from "vitest";
import { ApiError, errorFrom, rolesOf, type Me } from "./api";

const me: Me = {
  id: 1,
  username: "ann",
  first_name: "",
  last_name: "",
  email: "",
  is_superuser: false,
  can_create_projects: false,
  memberships: [
    { project: 1, project_name: "Office", role: "annotator" },
    { project: 2, project_name: "Web", role: "reviewer" },
  ],
};

describe("errorFrom", () => {
  it("reads the server's error body", async () => {
    const body = { error: { status: 409, code: "stale_decision", message: "Step 1 was decided.", details: { step: 1 } } };
    const error = await errorFrom(new Response(JSON.stringify(body), { status: 409 }));
    expect(error).toBeInstanceOf(ApiError);
    expect([error.status, error.code, error.message, error.details]).toEqual([409, "stale_decision", "Step 1 was decided.", { step: 1 }]);
  });

  it("turns any other failure into an error with the status", async () => {
    const error = await errorFrom(new Response("<h1>Bad gateway</h1>", { status: 502, statusText: "Bad Gateway" }));
    expect([error.status, error.code, error.message]).toEqual([502, "http_error", "502 Bad Gateway"]);
  });
});

describe("rolesOf", () => {
  it("is the roles of the user's memberships", () => {
    expect([...rolesOf(me)].sort()).toEqual(["annotator", "reviewer"]);
  });

  it("adds managing for people who may create projects, and everything for admins", () => {
    expect(rolesOf({ ...me, can_create_projects: true }).has("manager")).toBe(true);
    expect(rolesOf({ ...me, memberships: [], is_superuser: true }).size).toBe(4);
  });
});
