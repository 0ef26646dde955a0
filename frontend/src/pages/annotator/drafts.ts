/**
 * A correction half-written survives a reload: the editor is kept per episode and step in the
 * tab's sessionStorage while it holds something of the annotator's own (a thought, text, keys),
 * and dropped once the step is sent or the annotator chose to discard it. Discarding one asks
 * first (see `worthKeeping`).
 */
import type { EditorState } from "./editor";

const PREFIX = "tandem-draft";

function key(episode: number, step: number): string {
  return `${PREFIX}-${episode}-${step}`;
}

/** Does the editor hold work the annotator would lose by closing it? */
export function worthKeeping(editor: EditorState | null): boolean {
  if (!editor) return false;
  return editor.thought.trim() !== "" || editor.draft.content.trim() !== "" || editor.draft.keys.trim() !== "";
}

export function saveDraft(storage: Storage, episode: number, step: number, editor: EditorState | null): void {
  if (worthKeeping(editor)) storage.setItem(key(episode, step), JSON.stringify(editor));
  else storage.removeItem(key(episode, step));
}

export function loadDraft(storage: Storage, episode: number, step: number): EditorState | null {
  const kept = storage.getItem(key(episode, step));
  if (!kept) return null;
  try {
    const editor = JSON.parse(kept) as EditorState;
    return worthKeeping(editor) ? { ...editor, pickEnd: false } : null;
  } catch {
    storage.removeItem(key(episode, step));
    return null;
  }
}

export function clearDraft(storage: Storage, episode: number, step: number): void {
  storage.removeItem(key(episode, step));
}
