import { describe, expect, it } from "vitest";
import { draftOf } from "./actions";
import { clearDraft, loadDraft, saveDraft, worthKeeping } from "./drafts";
import { openEditor } from "./editor";

class MemoryStorage implements Storage {
  private items = new Map<string, string>();
  get length() {
    return this.items.size;
  }
  clear() {
    this.items.clear();
  }
  getItem(key: string) {
    return this.items.get(key) ?? null;
  }
  key(index: number) {
    return [...this.items.keys()][index] ?? null;
  }
  removeItem(key: string) {
    this.items.delete(key);
  }
  setItem(key: string, value: string) {
    this.items.set(key, value);
  }
}

describe("a half-written correction", () => {
  it("is kept per episode and step across a reload, and dropped once sent", () => {
    const storage = new MemoryStorage();
    const editor = { ...openEditor(draftOf({ type: "type", content: "Hello" })), thought: "Type the greeting." };
    saveDraft(storage, 7, 3, editor);
    expect(loadDraft(storage, 7, 3)).toEqual(editor);
    expect(loadDraft(storage, 7, 4)).toBeNull();
    clearDraft(storage, 7, 3);
    expect(loadDraft(storage, 7, 3)).toBeNull();
  });

  it("is only kept, and only worth a question before discarding, when it holds the annotator's own words", () => {
    const storage = new MemoryStorage();
    const untouched = openEditor(draftOf({ type: "click", point: [10, 10] }));
    expect(worthKeeping(untouched)).toBe(false);
    saveDraft(storage, 1, 1, untouched);
    expect(storage.length).toBe(0);
    expect(worthKeeping({ ...untouched, thought: "Open the menu." })).toBe(true);
  });

  it("ignores a stored draft that is not one", () => {
    const storage = new MemoryStorage();
    storage.setItem("tandem-draft-1-1", "{not json");
    expect(loadDraft(storage, 1, 1)).toBeNull();
    expect(storage.length).toBe(0);
  });
});
