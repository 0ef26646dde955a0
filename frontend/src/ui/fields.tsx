/** Form fields that name their own mistake: the problem is shown under the field, marks it
 * invalid, and is read with it. */

export function Problem({ id, text }: { id: string; text?: string }) {
  return text ? (
    <span className="field-problem" id={id}>
      {text}
    </span>
  ) : null;
}

/** A number typed as text (so a half-typed value is not lost), checked when the form is sent;
 * `help` is the id of an element that explains the field. */
export function NumberField({
  label,
  value,
  onChange,
  problem,
  id,
  hint,
  help,
}: {
  label: string;
  value: string;
  onChange: (v: string) => void;
  problem?: string;
  id: string;
  hint?: string;
  help?: string;
}) {
  const described = [problem ? `${id}-problem` : "", help ?? ""].filter(Boolean).join(" ");
  return (
    <label className="field">
      {label}
      <input
        inputMode="decimal"
        value={value}
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={problem ? true : undefined}
        aria-describedby={described || undefined}
        placeholder={hint}
        size={10}
      />
      <Problem id={`${id}-problem`} text={problem} />
    </label>
  );
}

/** A setting that is on or off, its label after the box. */
export function CheckField({
  label,
  checked,
  onChange,
}: {
  label: string;
  checked: boolean;
  onChange: (v: boolean) => void;
}) {
  return (
    <label>
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> {label}
    </label>
  );
}
