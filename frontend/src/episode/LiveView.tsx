/** A running episode's desktop, watched live: the annotator workspace's desktop view, which
 * asks `POST /api/episodes/{id}/stream/` for the stream; the server makes it view-only for
 * the project's managers and reviewers. Above it, where the episode is: the open step awaits
 * the annotator's decision (see ./liveStep). */
import { useState } from "react";
import { DesktopView, type StreamState } from "./DesktopView";
import { liveStatus } from "./liveStep";
import type { Step } from "../domain/api";
import "../pages/annotator/workspace.css";

const STATE_LABEL: Record<StreamState, string> = {
  connecting: "connecting…",
  live: "live, view-only",
  lost: "connection lost, retrying…",
  closed: "not streamed",
  off: "not watching",
};

export function LiveView({ episodeId, last }: { episodeId: number; last: Step | null }) {
  const [watching, setWatching] = useState(false);
  const [state, setState] = useState<StreamState>("off");
  const screen = last ? { width: last.screen_size[0], height: last.screen_size[1] } : null;
  return (
    <section className="live" aria-labelledby="live-heading">
      <div className="form-row">
        <h2 id="live-heading">Live desktop</h2>
        <span className="meta" role="status">
          {STATE_LABEL[state]}
        </span>
        <button type="button" className="btn btn-primary" onClick={() => setWatching((w) => !w)}>
          {watching ? "Stop watching" : "Watch live (view-only)"}
        </button>
      </div>
      <p className="meta" data-testid="live-step">
        {liveStatus(last)}
      </p>
      {watching ? (
        <div className="live-screen" data-testid="live-screen">
          <DesktopView
            episode={episodeId}
            streaming
            screen={screen}
            screenshotUrl={last ? `/api/screenshots/${last.screenshot}/` : null}
            proposal={null}
            draft={null}
            picking={false}
            onPick={() => undefined}
            onStreamState={setState}
          />
        </div>
      ) : null}
    </section>
  );
}
