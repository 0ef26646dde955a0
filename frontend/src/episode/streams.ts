/** When a live desktop's stream is asked for again (./DesktopView). */
import { ApiError } from "../api";

/** The waits before each new attempt after a lost or refused stream. */
export const RETRY_MS = [1000, 2000, 4000, 8000];

/** Whether a failed request for a stream is worth making again. A 409 is the server saying the
 * episode has ended, its desktop is no longer its own, or it is not being driven: asked again,
 * it answers the same until the episode's state changes (which renders the view anew). Any
 * other failure (the network, a restarting server) may pass. */
export function asksAgainAfter(cause: unknown): boolean {
  return !(cause instanceof ApiError && cause.status === 409);
}
