/** A running episode's desktop, watched view-only: the server issues a view-only stream to
 * the project's managers and reviewers (`POST /api/episodes/{id}/stream/`). */
import RFB from "@novnc/novnc";
import { useEffect, useRef, useState } from "react";
import { api } from "../../api";
import { Button, ErrorBanner } from "../../ui";

interface Stream {
  url: string;
  password: string;
  view_only: boolean;
  expires_at: string;
}

function socketUrl(url: string): string {
  if (/^wss?:/.test(url)) return url;
  const base = `${window.location.protocol === "https:" ? "wss" : "ws"}://${window.location.host}`;
  return `${base}${url.startsWith("/") ? "" : "/"}${url}`;
}

export function LiveView({ episodeId }: { episodeId: number }) {
  const [stream, setStream] = useState<Stream | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [state, setState] = useState("not connected");
  const screen = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!stream || !screen.current) return;
    const rfb = new RFB(screen.current, socketUrl(stream.url), { credentials: { password: stream.password }, shared: true });
    rfb.viewOnly = true;
    rfb.scaleViewport = true;
    rfb.addEventListener("connect", () => setState("connected (view-only)"));
    rfb.addEventListener("disconnect", () => setState("disconnected"));
    return () => rfb.disconnect();
  }, [stream]);
  const watch = async () => {
    setError(null);
    try {
      setStream(await api.post<Stream>(`/api/episodes/${episodeId}/stream/`));
      setState("connecting…");
    } catch (cause) {
      setError(cause);
    }
  };
  return (
    <section className="live" aria-labelledby="live-heading">
      <div className="form-row">
        <h2 id="live-heading">Live desktop</h2>
        <span className="meta" role="status">
          {state}
        </span>
        {stream ? null : (
          <Button variant="primary" onClick={watch}>
            Watch live (view-only)
          </Button>
        )}
      </div>
      <ErrorBanner error={error} onDismiss={() => setError(null)} />
      {stream ? <div ref={screen} className="live-screen" aria-label="Live desktop, view-only" /> : null}
    </section>
  );
}
