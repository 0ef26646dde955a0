import { useCallback, useState, type FormEvent } from "react";

/**
 * One thing the user asks the server to do (a form's submit or a button): `busy` while it
 * runs, and its failure kept in `error` for an `ErrorBanner` until `dismiss` or the next try.
 */
export function useSubmit() {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (cause) {
      setError(cause);
    } finally {
      setBusy(false);
    }
  }, []);
  const dismiss = useCallback(() => setError(null), []);
  /** A form's `onSubmit`: the browser's own submission is prevented, `work` runs instead. */
  const onSubmit = useCallback(
    (work: () => Promise<void>) => (event: FormEvent) => {
      event.preventDefault();
      void run(work);
    },
    [run],
  );
  return { error, busy, run, dismiss, onSubmit };
}
