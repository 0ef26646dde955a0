import { describe, expect, it } from "vitest";
import { counted } from "./format";

describe("counted", () => {
  it("writes one thing in the singular and any other count in the plural", () => {
    expect([counted(1, "task"), counted(2, "task"), counted(0, "task")]).toEqual(["1 task", "2 tasks", "0 tasks"]);
    expect(counted(3, "reply", "replies")).toBe("3 replies");
  });
});
