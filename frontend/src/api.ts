/**
 * The one way the app talks to Tandem's API: same-origin fetch with the session cookie, the
 * CSRF header on unsafe methods, JSON in and out, and every failure turned into an ApiError
 * carrying the server's error body `{"error": {status, code, message, details}}`.
 */

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;

  constructor(status: number, code: string, message: string, details?: unknown) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export function cookie(name: string): string | null {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return null;
}

/** Turns any response body into an ApiError, whether it is our error body or not. */
export async function errorFrom(response: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's error page, an empty body): the status line is all there is.
  }
  const error = (body as { error?: { code?: string; message?: string; details?: unknown } } | null)
    ?.error;
  if (error && typeof error.message === "string") {
    return new ApiError(response.status, error.code ?? "error", error.message, error.details);
  }
  return new ApiError(
    response.status,
    "http_error",
    `${response.status} ${response.statusText || "request failed"}`,
  );
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  body?: unknown;
  signal?: AbortSignal;
}

export async function request<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  let body: BodyInit | undefined;
  if (options.body instanceof FormData) {
    body = options.body;
  } else if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  if (method !== "GET") {
    headers["X-CSRFToken"] = cookie("csrftoken") ?? "";
  }
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body,
      credentials: "same-origin",
      signal: options.signal,
    });
  } catch (cause) {
    if (cause instanceof DOMException && cause.name === "AbortError") throw cause;
    throw new ApiError(0, "network_error", "The server cannot be reached. Check your connection.");
  }
  if (!response.ok) {
    const error = await errorFrom(response);
    if (error.code === "not_authenticated") {
      // The session ended (signed out elsewhere, expired): only the sign-in page can help.
      window.location.assign(`/accounts/login/?next=${encodeURIComponent(window.location.pathname)}`);
    }
    throw error;
  }
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

export const api = {
  get: <T>(path: string, signal?: AbortSignal) => request<T>(path, { signal }),
  post: <T>(path: string, body?: unknown) => request<T>(path, { method: "POST", body }),
  put: <T>(path: string, body?: unknown) => request<T>(path, { method: "PUT", body }),
  patch: <T>(path: string, body?: unknown) => request<T>(path, { method: "PATCH", body }),
  del: <T>(path: string) => request<T>(path, { method: "DELETE" }),
};

/** A page of a paginated list endpoint. */
export interface Page<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export type Role = "annotator" | "reviewer" | "manager" | "engineer";

export interface Membership {
  project: number;
  project_name: string;
  role: Role;
}

export interface Me {
  id: number;
  username: string;
  first_name: string;
  last_name: string;
  email: string;
  is_superuser: boolean;
  can_create_projects: boolean;
  memberships: Membership[];
}

export interface Project {
  id: number;
  name: string;
  platform: "desktop" | "web" | "android";
  [key: string]: unknown;
}

/** The roles a user works in anywhere; an admin has all of them. */
export function rolesOf(me: Me): Set<Role> {
  if (me.is_superuser) return new Set<Role>(["annotator", "reviewer", "manager", "engineer"]);
  const roles = new Set<Role>(me.memberships.map((m) => m.role));
  if (me.can_create_projects) roles.add("manager");
  return roles;
}

/** The user's role in one project (null: not a member); an admin's is "admin". */
export function roleIn(me: Pick<Me, "is_superuser" | "memberships">, project: number): Role | "admin" | null {
  if (me.is_superuser) return "admin";
  return me.memberships.find((m) => m.project === project)?.role ?? null;
}
