/**
 * The annotator's own step as the editor holds it (a correction, a reflection after a kept
 * error, a finish, a call to the user, a step the model could not propose), and what of it may
 * be sent.
 *
 * The thought always starts empty: the model's thought is shown greyed in the empty field as a
 * hint, never filled in, so a step submitted unedited can never record the model's reasoning as
 * the annotator's. A step is sent only with a thought of the annotator's own; the limits are
 * the server's (annotation/socket_messages.py).
 */
import { actionOf, type Draft } from "./actions";
import type { Action } from "../../domain/actions";

export const MAX_THOUGHT_CHARS = 10_000;
export const MAX_TEXT_CHARS = 10_000;

export interface EditorState {
  draft: Draft;
  thought: string;
  /** The next click on the desktop sets the drag's end, not its start. */
  pickEnd: boolean;
}

/** A new editor for `draft`, with an empty thought. */
export function openEditor(draft: Draft, pickEnd = false): EditorState {
  return { draft, thought: "", pickEnd };
}

/** What the empty thought field shows, greyed: the model's thought when there is one. */
export function thoughtHint(modelThought: string | null | undefined): string {
  const thought = modelThought?.trim();
  return thought
    ? `The model thought: ${thought} — write your own.`
    : "Why this step: what you see, and what you do next.";
}

/** The step to send, or the reason it cannot be sent yet. */
export function stepOf(editor: EditorState): { thought: string; action: Action } | string {
  const action = actionOf(editor.draft);
  if (typeof action === "string") return action;
  if ((action.content ?? "").length > MAX_TEXT_CHARS) {
    return `The text is too long (${action.content?.length} characters; at most ${MAX_TEXT_CHARS}).`;
  }
  const thought = editor.thought.trim();
  if (thought.includes("\u0000") || (action.content ?? "").includes("\u0000")) {
    return "The text holds a NUL character, which cannot be stored: remove it.";
  }
  if (!thought) return "Write your thought: why this step? The model's thought is only a hint.";
  if (thought.length > MAX_THOUGHT_CHARS) {
    return `The thought is too long (${thought.length} characters; at most ${MAX_THOUGHT_CHARS}).`;
  }
  return { thought, action };
}
