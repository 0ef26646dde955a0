/** The action space as the workspace edits and shows it (the server validates every action). */
import type { Action, ActionType, Direction } from "../../domain/actions";

export interface ActionKind {
  type: ActionType;
  label: string;
  points: 0 | 1 | 2;
  content?: "text" | "answer";
  keys?: boolean;
  direction?: boolean;
}

/** The desktop action space (design §4), in the order the editor offers it. */
export const DESKTOP_ACTIONS: ActionKind[] = [
  { type: "click", label: "Click", points: 1 },
  { type: "left_double", label: "Double click", points: 1 },
  { type: "right_single", label: "Right click", points: 1 },
  { type: "drag", label: "Drag", points: 2 },
  { type: "scroll", label: "Scroll", points: 1, direction: true },
  { type: "type", label: "Type text", points: 0, content: "text" },
  { type: "hotkey", label: "Press keys", points: 0, keys: true },
  { type: "wait", label: "Wait", points: 0 },
  { type: "finished", label: "Finished", points: 0, content: "answer" },
  { type: "call_user", label: "Call user", points: 0 },
];

export const DIRECTIONS: Direction[] = ["up", "down", "left", "right"];

export function kindOf(type: ActionType): ActionKind {
  return (
    DESKTOP_ACTIONS.find((k) => k.type === type) ?? { type, label: type, points: 0 }
  );
}

/** Keys as typed by a person ("Ctrl+C", "ctrl c") in the space-separated lowercase form. */
export function parseKeys(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[\s+]+/)
    .map((k) => k.trim())
    .filter(Boolean);
}

/** A one-line description of an action, for people. */
export function describe(action: Action | null | undefined): string {
  if (!action) return "no action";
  const at = action.point ? ` at (${action.point[0]}, ${action.point[1]})` : "";
  switch (action.type) {
    case "drag":
      return `drag from (${action.point?.join(", ")}) to (${action.end?.join(", ")})`;
    case "scroll":
      return `scroll ${action.direction}${at}`;
    case "type":
      return `type ${JSON.stringify(action.content ?? "")}`;
    case "hotkey":
      return `press ${(action.keys ?? []).join("+")}`;
    case "finished":
      return action.content ? `finished: ${action.content}` : "finished";
    case "open_app":
      return `open ${action.app}`;
    default:
      return `${kindOf(action.type).label.toLowerCase()}${at}`;
  }
}

/** The editable form of an action, and back. */
export interface Draft {
  type: ActionType;
  point: [number, number] | null;
  end: [number, number] | null;
  direction: Direction;
  content: string;
  keys: string;
}

export function draftOf(action: Action | null | undefined): Draft {
  return {
    type: action?.type ?? "click",
    point: action?.point ?? null,
    end: action?.end ?? null,
    direction: action?.direction ?? "down",
    content: action?.content ?? "",
    keys: (action?.keys ?? []).join(" "),
  };
}

/** The action a draft describes, or the reason it is not complete yet. */
export function actionOf(draft: Draft): Action | string {
  const kind = kindOf(draft.type);
  const action: Action = { type: draft.type };
  if (kind.points >= 1) {
    if (!draft.point) return "Click on the desktop to set the point.";
    action.point = draft.point;
  }
  if (kind.points === 2) {
    if (!draft.end) return "Click on the desktop again to set where the drag ends.";
    action.end = draft.end;
  }
  if (kind.direction) action.direction = draft.direction;
  if (kind.content === "text") {
    if (!draft.content) return "Write the text to type.";
    action.content = draft.content;
  }
  if (kind.content === "answer") action.content = draft.content;
  if (kind.keys) {
    const keys = parseKeys(draft.keys);
    if (keys.length === 0) return "Write the keys to press, e.g. ctrl s.";
    action.keys = keys;
  }
  return action;
}
