import { describe, expect, it } from "vitest";
import { draftOf } from "./actions";
import { MAX_THOUGHT_CHARS, openEditor, stepOf, thoughtHint } from "./editor";
import { MAX_DECISION_MS, decisionMs } from "./socket";
import type { Action } from "../../domain/actions";

const modelClick: Action = { type: "click", point: [10, 20] };

describe("the step editor", () => {
  it("starts with an empty thought whatever the model thought", () => {
    for (const action of [modelClick, { type: "finished" as const, content: "" }, { type: "call_user" as const }, null]) {
      expect(openEditor(draftOf(action)).thought).toBe("");
    }
  });

  it("shows the model's thought only as a hint", () => {
    expect(thoughtHint("Open the File menu. ")).toBe("The model thought: Open the File menu. — write your own.");
    expect(thoughtHint("")).toBe("Why this step: what you see, and what you do next.");
    expect(thoughtHint(null)).toBe("Why this step: what you see, and what you do next.");
  });

  it("sends nothing until the annotator wrote a thought of their own", () => {
    const editor = openEditor(draftOf(modelClick));
    expect(stepOf(editor)).toMatch(/Write your thought/);
    expect(stepOf({ ...editor, thought: "   \n" })).toMatch(/Write your thought/);
    expect(stepOf({ ...editor, thought: "  The menu is lower down. " })).toEqual({
      thought: "The menu is lower down.",
      action: modelClick,
    });
  });

  it("asks for the thought of a finish, a call to the user and a reflection too", () => {
    for (const type of ["finished", "call_user", "hotkey"] as const) {
      const draft = { ...draftOf({ type }), keys: "ctrl l" };
      expect(stepOf(openEditor(draft))).toMatch(/Write your thought/);
      expect(typeof stepOf({ ...openEditor(draft), thought: "Done." })).toBe("object");
    }
  });

  it("says what is missing of the action before the thought", () => {
    expect(stepOf(openEditor(draftOf({ type: "type" })))).toBe("Write the text to type.");
  });

  it("refuses what the server would refuse", () => {
    const editor = openEditor(draftOf(modelClick));
    expect(stepOf({ ...editor, thought: "x".repeat(MAX_THOUGHT_CHARS + 1) })).toMatch(/too long/);
    expect(stepOf({ ...editor, thought: "a\u0000b" })).toMatch(/NUL/);
    const typed = openEditor({ ...draftOf({ type: "type" }), content: "ls\u0000\n" });
    expect(stepOf({ ...typed, thought: "List the files." })).toMatch(/NUL/);
  });
});

describe("the decision time", () => {
  it("is never negative and never over a day", () => {
    expect(decisionMs(1000, 900)).toBe(0);
    expect(decisionMs(1000, 2500)).toBe(1500);
    expect(decisionMs(0, 3 * MAX_DECISION_MS)).toBe(MAX_DECISION_MS);
  });
});
