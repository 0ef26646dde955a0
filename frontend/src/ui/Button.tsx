import type { ButtonHTMLAttributes } from "react";

export interface ButtonProps extends ButtonHTMLAttributes<HTMLButtonElement> {
  variant?: "primary" | "secondary" | "danger";
  /** A keyboard shortcut shown on the button (the handler is bound elsewhere). */
  shortcut?: string;
}

export function Button({ variant = "secondary", shortcut, children, className, ...rest }: ButtonProps) {
  return (
    <button
      type="button"
      className={`btn btn-${variant}${className ? ` ${className}` : ""}`}
      aria-keyshortcuts={shortcut}
      {...rest}
    >
      {children}
      {shortcut ? <kbd className="shortcut">{shortcut}</kbd> : null}
    </button>
  );
}
