/**
 * The episode's WebSocket, kept open: reconnects with backoff when it drops, rebuilds the
 * episode from the server's `state` on every connect, and re-sends a decision the server has
 * not acknowledged yet (with its step index, so a duplicate is only acknowledged again).
 */
import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import { EMPTY, reduce, type EpisodeView } from "./episode";
import type { DecideMessage, EpisodeStatePayload, ServerEvent } from "../../domain/socket";

const HEARTBEAT_MS = 30_000;
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];

/** What to do with an unacknowledged decision once the server's state is known again. */
export function pendingAfterState(
  pending: DecideMessage,
  state: EpisodeStatePayload,
): "resend" | "done" | "stale" {
  const step = state.steps.find((s) => s.step === pending.step);
  if (step?.decision) return step.decision === pending.decision ? "done" : "stale";
  if (!state.ended && state.open_step === pending.step) return "resend";
  return "stale";
}

/** The server refuses a decision time over a day (annotation/socket_messages.py). */
export const MAX_DECISION_MS = 24 * 60 * 60 * 1000;

/** How long the annotator took since `startedAt`, within what the server accepts: a step left
 * open overnight is sent as a day, not refused. */
export function decisionMs(startedAt: number, now: number = Date.now()): number {
  return Math.min(MAX_DECISION_MS, Math.max(0, Math.round(now - startedAt)));
}

export function backoff(attempt: number): number {
  return BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
}

export type Connection = "connecting" | "open" | "reconnecting" | "closed";

export function socketUrl(episode: number, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/episodes/${episode}/`;
}

export function useEpisodeSocket(episode: number) {
  const [view, dispatch] = useReducer(
    (state: EpisodeView, message: ServerEvent) => reduce(state, message),
    EMPTY,
  );
  const [connection, setConnection] = useState<Connection>("connecting");
  const [pending, setPending] = useState<DecideMessage | null>(null);
  const pendingRef = useRef<DecideMessage | null>(null);
  const socketRef = useRef<WebSocket | null>(null);
  const endedRef = useRef(false);

  const setPendingBoth = useCallback((message: DecideMessage | null) => {
    pendingRef.current = message;
    setPending(message);
  }, []);

  useEffect(() => {
    let attempt = 0;
    let timer: number | undefined;
    let heartbeat: number | undefined;
    let disposed = false;

    function open() {
      const socket = new WebSocket(socketUrl(episode));
      socketRef.current = socket;
      socket.onopen = () => {
        attempt = 0;
        setConnection("open");
        heartbeat = window.setInterval(() => {
          if (!endedRef.current) socket.send(JSON.stringify({ type: "heartbeat" }));
        }, HEARTBEAT_MS);
      };
      socket.onmessage = (raw) => {
        const message = JSON.parse(raw.data as string) as ServerEvent;
        const waiting = pendingRef.current;
        if (message.event === "state") {
          endedRef.current = message.payload.ended;
          if (waiting) {
            const next = pendingAfterState(waiting, message.payload);
            if (next === "resend") socket.send(JSON.stringify(waiting));
            else setPendingBoth(null);
          }
        } else if (message.event === "demonstrated") {
          socket.send(JSON.stringify({ type: "state" }));  // the steps the demonstration made
        } else if (message.event === "ended") {
          endedRef.current = true;
          setPendingBoth(null);
        } else if (message.event === "decision_ack" && waiting?.step === message.payload.step) {
          setPendingBoth(null);
        } else if (message.event === "error" && waiting && (message.payload.step ?? waiting.step) === waiting.step) {
          // Refused (stale, invalid, malformed): shown to the annotator, not sent again.
          setPendingBoth(null);
        }
        dispatch(message);
      };
      socket.onclose = () => {
        window.clearInterval(heartbeat);
        if (socketRef.current === socket) socketRef.current = null;
        if (disposed) return;
        if (endedRef.current && !pendingRef.current) {
          setConnection("closed");
          return;
        }
        setConnection("reconnecting");
        timer = window.setTimeout(open, backoff(attempt++));
      };
    }

    open();
    return () => {
      disposed = true;
      window.clearTimeout(timer);
      window.clearInterval(heartbeat);
      socketRef.current?.close();
    };
  }, [episode, setPendingBoth]);

  /** Sends a decision now, or on the next connect; it stays pending until acknowledged. */
  const decide = useCallback(
    (message: DecideMessage) => {
      setPendingBoth(message);
      const socket = socketRef.current;
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
    },
    [setPendingBoth],
  );

  const abandon = useCallback(() => {
    socketRef.current?.send(JSON.stringify({ type: "abandon" }));
  }, []);

  return { view, connection, pending, decide, abandon };
}
