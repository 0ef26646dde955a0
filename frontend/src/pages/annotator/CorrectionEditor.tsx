/** The annotator's own step: the action type, its point(s) picked on the desktop, its text or
 * keys, and the thought — which starts empty, with the model's shown greyed as a hint, and must
 * be written before the step can be submitted (see ./editor). */
import { useEffect, useRef } from "react";
import { Button } from "../../ui";
import { DESKTOP_ACTIONS, DIRECTIONS, kindOf, type Draft } from "./actions";
import type { Size } from "../../episode/coords";
import { MAX_TEXT_CHARS, MAX_THOUGHT_CHARS, stepOf, thoughtHint, type EditorState } from "./editor";
import type { ActionType, Direction } from "../../domain/actions";

/** A point typed as two numbers, kept inside the screen. */
function PointInput({
  name,
  value,
  screen,
  onChange,
}: {
  name: string;
  value: [number, number] | null;
  screen: Size;
  onChange: (point: [number, number] | null) => void;
}) {
  const set = (axis: 0 | 1, text: string) => {
    const limit = axis === 0 ? screen.width - 1 : screen.height - 1;
    const number = Math.min(limit, Math.max(0, Math.round(Number(text))));
    if (text === "" || Number.isNaN(number)) return;
    const next: [number, number] = value ? [...value] : [0, 0];
    next[axis] = number;
    onChange(next);
  };
  return (
    <span className="point-input">
      <span>{name}</span>
      <label>
        x{" "}
        <input
          type="number"
          min={0}
          max={screen.width - 1}
          value={value ? value[0] : ""}
          onChange={(e) => set(0, e.target.value)}
          aria-label={`${name} x`}
          data-testid={`editor-${name.toLowerCase()}-x`}
        />
      </label>{" "}
      <label>
        y{" "}
        <input
          type="number"
          min={0}
          max={screen.height - 1}
          value={value ? value[1] : ""}
          onChange={(e) => set(1, e.target.value)}
          aria-label={`${name} y`}
          data-testid={`editor-${name.toLowerCase()}-y`}
        />
      </label>
    </span>
  );
}

export function CorrectionEditor({
  editor,
  onChange,
  onSubmit,
  onCancel,
  busy,
  title,
  screen,
  modelThought,
}: {
  screen: Size;
  /** The model's thought for this step, shown greyed in the empty thought field. */
  modelThought: string | null;
  editor: EditorState;
  onChange: (next: EditorState) => void;
  onSubmit: () => void;
  onCancel: () => void;
  busy: boolean;
  title: string;
}) {
  const { draft, thought } = editor;
  const kind = kindOf(draft.type);
  const result = stepOf(editor);
  const thoughtRef = useRef<HTMLTextAreaElement>(null);
  useEffect(() => thoughtRef.current?.focus(), []);

  const setDraft = (change: Partial<Draft>) => onChange({ ...editor, draft: { ...draft, ...change } });

  return (
    <form
      className="editor"
      aria-label={title}
      onSubmit={(event) => {
        event.preventDefault();
        if (typeof result !== "string") onSubmit();
      }}
    >
      <h3>{title}</h3>
      <label htmlFor="editor-type">Action</label>
      <select
        id="editor-type"
        value={draft.type}
        onChange={(e) => onChange({ ...editor, pickEnd: false, draft: { ...draft, type: e.target.value as ActionType } })}
      >
        {DESKTOP_ACTIONS.map((k) => (
          <option key={k.type} value={k.type}>
            {k.label}
          </option>
        ))}
      </select>
      {kind.points > 0 ? (
        <fieldset className="editor-points">
          <legend>
            Screen pixels: click on the desktop{kind.points === 2 ? " twice (from, then to)" : ""}, or
            type them
          </legend>
          <PointInput name={kind.points === 2 ? "From" : "Point"} value={draft.point} screen={screen} onChange={(point) => setDraft({ point })} />
          {kind.points === 2 ? (
            <PointInput name="To" value={draft.end} screen={screen} onChange={(end) => setDraft({ end })} />
          ) : null}
        </fieldset>
      ) : null}
      {kind.direction ? (
        <>
          <label htmlFor="editor-direction">Direction</label>
          <select id="editor-direction" value={draft.direction} onChange={(e) => setDraft({ direction: e.target.value as Direction })}>
            {DIRECTIONS.map((d) => (
              <option key={d} value={d}>
                {d}
              </option>
            ))}
          </select>
        </>
      ) : null}
      {kind.content ? (
        <>
          <label htmlFor="editor-content">{kind.content === "text" ? "Text to type (end with a new line to submit)" : "Answer (may be empty)"}</label>
          <textarea
            id="editor-content"
            rows={2}
            maxLength={MAX_TEXT_CHARS}
            value={draft.content}
            onChange={(e) => setDraft({ content: e.target.value })}
          />
        </>
      ) : null}
      {kind.keys ? (
        <>
          <label htmlFor="editor-keys">Keys (e.g. ctrl s, alt f4, enter)</label>
          <input id="editor-keys" value={draft.keys} onChange={(e) => setDraft({ keys: e.target.value })} autoComplete="off" />
        </>
      ) : null}
      <label htmlFor="editor-thought">Thought</label>
      <textarea
        id="editor-thought"
        ref={thoughtRef}
        rows={3}
        required
        maxLength={MAX_THOUGHT_CHARS}
        placeholder={thoughtHint(modelThought)}
        value={thought}
        onChange={(e) => onChange({ ...editor, thought: e.target.value })}
      />
      {typeof result === "string" ? <p className="hint" role="status">{result}</p> : null}
      <div className="row">
        <Button type="submit" variant="primary" disabled={busy || typeof result === "string"}
          disabledReason={busy ? "Sending your decision…" : "The step is not complete yet (see above)."}
          shortcut="Ctrl+Enter"
        >
          Submit step
        </Button>
        <Button onClick={onCancel} shortcut="Esc">
          Cancel
        </Button>
      </div>
    </form>
  );
}
