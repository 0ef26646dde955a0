import { useCallback, useEffect, useState } from "react";
import { api } from "../api";

/** GETs `path` (again when it changes or on `reload()`), with loading and error state. */
export function useApi<T>(path: string | null) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(path !== null);
  const [generation, setGeneration] = useState(0);

  useEffect(() => {
    if (path === null) return;
    const abort = new AbortController();
    setLoading(true);
    api
      .get<T>(path, abort.signal)
      .then((value) => {
        setData(value);
        setError(null);
      })
      .catch((cause) => {
        if (!abort.signal.aborted) setError(cause);
      })
      .finally(() => {
        if (!abort.signal.aborted) setLoading(false);
      });
    return () => abort.abort();
  }, [path, generation]);

  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data, error, loading, reload };
}
