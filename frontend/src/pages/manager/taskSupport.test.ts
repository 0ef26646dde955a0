import { describe, expect, it } from "vitest";
import { supportBadges } from "./taskSupport";

describe("supportBadges", () => {
  it("shows nothing for a task that runs and has its files", () => {
    expect(supportBadges({ cannot_run: "", files_missing: [] })).toEqual([]);
  });

  it("names the reason a task cannot run", () => {
    const [badge] = supportBadges({ cannot_run: "setup step 2 (googledrive) needs an account", files_missing: [] });
    expect(badge.label).toBe("cannot run: setup step 2 (googledrive) needs an account");
    expect(badge.kind).toBe("cannot-run");
  });

  it("counts the missing files and lists every URL in the tooltip", () => {
    const urls = ["https://host/a.xlsx", "https://host/b.docx"];
    const badges = supportBadges({ cannot_run: "needs a login", files_missing: urls });
    expect(badges.map((b) => b.kind)).toEqual(["cannot-run", "files-missing"]);
    expect(badges[1].label).toBe("files missing (2)");
    expect(badges[1].title.split("\n").slice(1)).toEqual(urls);
  });

  it("names the programs the project's desktop lacks and says where to choose another", () => {
    const [badge] = supportBadges({ cannot_run: "", files_missing: [], programs_missing: ["python", "gimp"] });
    expect(badge.kind).toBe("programs-missing");
    expect(badge.label).toBe("not on this desktop: python, gimp");
    expect(badge.title).toContain("Members and desktop");
  });

  it("points to a way to upload missing files that exists", () => {
    const [badge] = supportBadges({ cannot_run: "", files_missing: ["https://host/a.xlsx"] });
    expect(badge.title).toContain("/api/task-files/");
    expect(badge.title).not.toContain("under Task files");
  });

  it("flags an evaluator that passes without work until a manager trusts it", () => {
    const check = {
      status: "passes_without_work" as const,
      flagged: true,
      score: 1,
      reason: "scores 1 on the untouched desktop: every metric ran",
      stale: false,
      requested_at: "2026-11-26T10:00:00Z",
      checked_at: "2026-11-26T10:01:00Z",
      cleared_by: null,
      cleared_at: null,
    };
    const [badge] = supportBadges({ cannot_run: "", files_missing: [], evaluator_check: check });
    expect(badge.kind).toBe("passes-without-work");
    expect(badge.title).toContain("scores 1 on the untouched desktop");
    const cleared = { ...check, flagged: false, cleared_by: "maria", cleared_at: "2026-11-26T11:00:00Z" };
    expect(supportBadges({ cannot_run: "", files_missing: [], evaluator_check: cleared })).toEqual([]);
    const unsupported = { ...check, status: "cannot_evaluate" as const, reason: "metric compare_audios is not supported here" };
    const [why] = supportBadges({ cannot_run: "", files_missing: [], evaluator_check: unsupported });
    expect([why.kind, why.title]).toEqual(["cannot-evaluate", "metric compare_audios is not supported here"]);
  });
});
