import { describe, expect, it } from "vitest";
import { answerText } from "../domain/quality";
import { answerFor, boxFrom, screenPoint } from "./gold";

describe("the gold editor", () => {
  it("makes a box from a drag in any direction, clamped to the screen", () => {
    expect(boxFrom([700.4, 420], [600, 380.6], 1280, 800)).toEqual([600, 381, 700, 420]);
    expect(boxFrom([-20, 790], [1300, 900], 1280, 800)).toEqual([0, 790, 1279, 799]);
  });
  it("reads a pointer over a scaled image in the screenshot's pixels", () => {
    const rect = { left: 100, top: 50, width: 640, height: 400 };
    expect(screenPoint(420, 250, rect, 1280, 800)).toEqual([640, 400]);
  });
  it("makes the final action's answer, with the box as its target", () => {
    const click = { type: "click" as const, point: [640, 400] as [number, number] };
    expect(answerFor(click, [600, 380, 700, 420])).toEqual({ type: "click", region: [600, 380, 700, 420] });
    expect(answerFor(click, null)).toEqual({ type: "click", point: [640, 400] });
    const typed = answerFor({ type: "type", content: "Hello  world" }, null);
    expect(typed).toEqual({ type: "type", text: "Hello  world", normalise: "whitespace" });
    expect(answerText(answerFor({ type: "hotkey", keys: ["ctrl", "s"] }, null)!)).toBe("hotkey ctrl+s");
    expect(answerFor(null, null)).toBeNull();
  });
});
