/** A gold step as the manager edits it (annotation/quality/rules.py states what counts as
 * right): the box dragged on the screenshot, in the screenshot's pixels, and the answer it
 * makes for the step's final action. */
import type { Action } from "../domain/actions";
import type { Box, GoldAnswer } from "../domain/quality";

/** The box between two corners of a drag, in whole pixels, clamped to the screen. */
export function boxFrom(a: [number, number], b: [number, number], width: number, height: number): Box {
  const clamp = (v: number, max: number) => Math.min(max - 1, Math.max(0, Math.round(v)));
  const [x0, x1] = [clamp(a[0], width), clamp(b[0], width)].sort((p, q) => p - q);
  const [y0, y1] = [clamp(a[1], height), clamp(b[1], height)].sort((p, q) => p - q);
  return [x0, y0, x1, y1];
}

/** A point on the screen from a pointer position over the image drawn at `rect`. */
export function screenPoint(clientX: number, clientY: number, rect: Pick<DOMRect, "left" | "top" | "width" | "height">, width: number, height: number): [number, number] {
  return [((clientX - rect.left) * width) / rect.width, ((clientY - rect.top) * height) / rect.height];
}

/** The answer the final action makes with the drawn box as its target (when it has a point),
 * its text for `type` (spaces as one), its keys for `hotkey`. */
export function answerFor(action: Action | null, box: Box | null): GoldAnswer | null {
  if (!action) return null;
  const answer: GoldAnswer = { type: action.type };
  if (action.point) {
    if (box) answer.region = box;
    else answer.point = action.point;
  }
  if (action.type === "type" && typeof action.content === "string") {
    answer.text = action.content;
    answer.normalise = "whitespace";
  }
  if (action.type === "hotkey" && action.keys) answer.keys = action.keys;
  if (action.type === "scroll" && action.direction) answer.direction = action.direction;
  return answer;
}
