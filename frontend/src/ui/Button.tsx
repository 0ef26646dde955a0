import { useId, type ButtonHTMLAttributes } from "react";

export interface ButtonProps extends ButtonHTMLAttributes<HTMLButtonElement> {
  variant?: "primary" | "secondary" | "danger";
  /** A keyboard shortcut shown on the button (the handler is bound elsewhere). */
  shortcut?: string;
  /** Why the button is disabled: shown beside it while it is, and read with it. */
  disabledReason?: string;
}

export function Button({ variant = "secondary", shortcut, disabledReason, children, className, ...rest }: ButtonProps) {
  const reasonId = useId();
  const explained = rest.disabled && disabledReason ? disabledReason : null;
  const button = (
    <button
      type="button"
      className={`btn btn-${variant}${className ? ` ${className}` : ""}`}
      aria-keyshortcuts={shortcut}
      {...rest}
      aria-describedby={explained ? reasonId : rest["aria-describedby"]}
    >
      {children}
      {shortcut ? <kbd className="shortcut">{shortcut}</kbd> : null}
    </button>
  );
  if (!explained) return button;
  return (
    <>
      {button}
      <span id={reasonId} className="disabled-reason" data-testid="disabled-reason">
        {explained}
      </span>
    </>
  );
}
