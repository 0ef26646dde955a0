import { ApiError } from "../api";

/** Shows an error to the user: the server's message, its code, and any details. */
export function ErrorBanner({ error, onDismiss }: { error: unknown; onDismiss?: () => void }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  const code = error instanceof ApiError ? error.code : null;
  const details = error instanceof ApiError && error.details ? error.details : null;
  return (
    <div className="error-banner" role="alert">
      <strong>{message}</strong>
      {code ? <span className="error-code"> ({code})</span> : null}
      {details ? <pre className="error-details">{JSON.stringify(details, null, 2)}</pre> : null}
      {onDismiss ? (
        <button type="button" className="btn btn-link" onClick={onDismiss} aria-label="Dismiss error">
          ×
        </button>
      ) : null}
    </div>
  );
}
