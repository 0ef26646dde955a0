import { describe, expect, it } from "vitest";
import { counted, ranBy, versionLabel } from "./format";

describe("counted", () => {
  it("writes one thing in the singular and any other count in the plural", () => {
    expect([counted(1, "task"), counted(2, "task"), counted(0, "task")]).toEqual(["1 task", "2 tasks", "0 tasks"]);
    expect(counted(3, "reply", "replies")).toBe("3 replies");
  });
});

describe("versionLabel", () => {
  it("names the OCR baseline as the baseline, not by its tesseract version alone", () => {
    expect(versionLabel("ocr-5.3.0")).toBe("baseline (OCR, tesseract 5.3.0)");
    expect(versionLabel("ui-tars-ft-1")).toBe("ui-tars-ft-1");
  });
});

describe("ranBy", () => {
  it("marks a rollout as the model's, not the manager's who started it", () => {
    expect(ranBy({ annotator: "mona", mode: "autonomous", model_version: "ft-1" })).toBe("rollout · ft-1");
    expect(ranBy({ annotator: "ann", mode: "interactive", model_version: "ft-1" })).toBe("ann");
  });
});
