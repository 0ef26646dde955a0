import { useEffect } from "react";

/** Calls `reload` every `ms` milliseconds while `active` (a job runs, a version loads). */
export function usePoll(reload: () => void, active: boolean, ms = 2000): void {
  useEffect(() => {
    if (!active) return;
    const timer = window.setInterval(reload, ms);
    return () => window.clearInterval(timer);
  }, [reload, active, ms]);
}
