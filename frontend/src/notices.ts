/**
 * Live notices for the signed-in user over `/ws/notifications/` (backend/notifications.py):
 * e.g. `tasks_assigned` when a manager puts tasks in their queue. The socket reconnects with a
 * growing backoff while the page is open; a page only says which notices it wants.
 */
import { useEffect, useRef, useState } from "react";

export interface TasksAssigned {
  event: "tasks_assigned";
  payload: { count: number; task_ids: number[]; by: string };
}

export type Notice = TasksAssigned | { event: "hello"; payload: { username: string } } | { event: string; payload: unknown };

const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000];

export function noticesUrl(location: Pick<Location, "protocol" | "host"> = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/notifications/`;
}

export function isTasksAssigned(notice: Notice): notice is TasksAssigned {
  return notice.event === "tasks_assigned";
}

/** What an assignment notice says to the annotator. */
export function assignedText(notice: TasksAssigned): string {
  const { count, by } = notice.payload;
  return `${by} assigned ${count === 1 ? "a task" : `${count} tasks`} to you.`;
}

/** A notice from the socket's text, or null for anything that is not one. */
export function parseNotice(text: string): Notice | null {
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === "object" && value !== null && typeof (value as Notice).event === "string") {
      return value as Notice;
    }
  } catch {
    // Not JSON: not a notice.
  }
  return null;
}

/** Calls `onNotice` with every notice while the component is mounted; answers whether the
 * socket is open now (notices sent while it is not are missed: reload after a reconnect). */
export function useNotices(onNotice: (notice: Notice) => void): boolean {
  const handler = useRef(onNotice);
  handler.current = onNotice;
  const [open, setOpen] = useState(false);
  useEffect(() => {
    let socket: WebSocket | null = null;
    let timer: number | undefined;
    let attempt = 0;
    let disposed = false;
    function connect() {
      socket = new WebSocket(noticesUrl());
      socket.onopen = () => {
        attempt = 0;
        setOpen(true);
      };
      socket.onmessage = (message) => {
        const notice = parseNotice(String(message.data));
        if (notice) handler.current(notice);
      };
      socket.onclose = () => {
        if (disposed) return;
        setOpen(false);
        timer = window.setTimeout(connect, BACKOFF_MS[Math.min(attempt++, BACKOFF_MS.length - 1)]);
      };
    }
    connect();
    return () => {
      disposed = true;
      window.clearTimeout(timer);
      socket?.close();
    };
  }, []);
  return open;
}
