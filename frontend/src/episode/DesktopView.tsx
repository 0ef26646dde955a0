/**
 * The live desktop: the noVNC client (view-only: the annotator's input reaches the desktop
 * only as decided actions) with the step's action drawn over it, and clicks on it turned into
 * screen pixels for corrections. Until the stream shows frames, the step's observation is shown.
 * While the annotator drives (`control`), the stream is the control stream: their mouse and
 * keys go to the desktop through the platform's recording gate, and nothing is drawn over it.
 */
import RFB from "@novnc/novnc";
import { useCallback, useEffect, useLayoutEffect, useRef, useState, type MouseEvent } from "react";
import { api } from "../api";
import { asksAgainAfter, RETRY_MS } from "./streams";
import { clientToScreen, fitContain, isOnScreen, type Box, type Point, type Size } from "./coords";
import { ActionOverlay } from "./ActionOverlay";
import type { Action } from "../domain/actions";

interface Stream {
  url: string;
  view_only: boolean;
  /** Why the recording gate closed the previous control stream, if it did. */
  last_refusal?: string | null;
}

/** `closed`: the server will not stream it (the episode ended, or its desktop was reset). */
export type StreamState = "connecting" | "live" | "lost" | "closed" | "off";


function useDesktopStream(episode: number, enabled: boolean, target: HTMLDivElement | null, control: boolean) {
  const [state, setState] = useState<StreamState>("connecting");
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (!enabled || target === null) {
      setState("off");
      return;
    }
    let rfb: RFB | null = null;
    let disposed = false;
    let attempt = 0;
    let timer: number | undefined;

    async function connect() {
      setState(attempt === 0 ? "connecting" : "lost");
      let stream: Stream;
      try {
        stream = await api.post<Stream>(`/api/episodes/${episode}/${control ? "control-stream" : "stream"}/`);
      } catch (cause) {
        if (disposed) return;
        setError(cause instanceof Error ? cause.message : String(cause));
        if (!asksAgainAfter(cause)) {
          setState("closed");
          return;
        }
        setState("lost");
        timer = window.setTimeout(connect, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]);
        return;
      }
      if (disposed || target === null) return;
      if (stream.last_refusal) setError(`The desktop refused your input: ${stream.last_refusal}.`);
      rfb = new RFB(target, stream.url, { shared: true });
      rfb.viewOnly = !control;
      rfb.scaleViewport = true;
      rfb.focusOnClick = control;
      rfb.background = "#11151c";
      rfb.addEventListener("connect", () => {
        attempt = 0;
        if (!stream.last_refusal) setError(null);
        setState("live");
        if (control) rfb?.focus();
      });
      rfb.addEventListener("disconnect", () => {
        rfb = null;
        if (disposed) return;
        setState("lost");
        timer = window.setTimeout(connect, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]);
      });
    }

    connect();
    return () => {
      disposed = true;
      window.clearTimeout(timer);
      rfb?.disconnect();
    };
  }, [episode, enabled, target, control]);

  return { state, error };
}

export interface DesktopViewProps {
  episode: number;
  streaming: boolean;
  screen: Size | null;
  screenshotUrl: string | null;
  /** The model's proposed action, drawn until the step is decided. */
  proposal: Action | null;
  /** The annotator's own action while they edit it, drawn over the proposal. */
  draft: Action | null;
  /** Points already picked for a drag whose end is not picked yet. */
  picking: boolean;
  onPick: (pixel: Point) => void;
  onStreamState?: (state: StreamState) => void;
  /** The annotator drives the desktop: a control stream, and nothing drawn over it. */
  control?: boolean;
}

const STILL_RETRIES = 5;

/** The step's observation. A load that fails (the web server restarting mid-load) is tried
 * again after 1, 2, … seconds, up to STILL_RETRIES times: no broken picture is left. */
function StillScreen({ url }: { url: string }) {
  const [tries, setTries] = useState({ url, failed: 0 });
  const failed = tries.url === url ? tries.failed : 0;
  const timer = useRef<number | undefined>(undefined);
  useEffect(() => () => window.clearTimeout(timer.current), [url]);
  const onError = useCallback(() => {
    if (failed >= STILL_RETRIES) return;
    timer.current = window.setTimeout(() => setTries({ url, failed: failed + 1 }), 1000 * (failed + 1));
  }, [url, failed]);
  const src = failed ? `${url}?try=${failed}` : url;
  return <img className="desktop-still" src={src} alt="The desktop at this step" onError={onError} />;
}

export function DesktopView(props: DesktopViewProps) {
  const { episode, streaming, screen, screenshotUrl, proposal, draft, picking, onPick, onStreamState } = props;
  const control = props.control ?? false;
  const stageRef = useRef<HTMLDivElement>(null);
  const [vncTarget, setVncTarget] = useState<HTMLDivElement | null>(null);
  const stream = useDesktopStream(episode, streaming, vncTarget, control);
  const [drawn, setDrawn] = useState<Box | null>(null);

  useEffect(() => onStreamState?.(stream.state), [stream.state, onStreamState]);

  /** The drawn desktop in page coordinates: noVNC's canvas when live, else the fitted image. */
  const drawnOnPage = useCallback((): Box | null => {
    const stage = stageRef.current;
    if (!stage || !screen) return null;
    const canvas = stream.state === "live" ? vncTarget?.querySelector("canvas") : null;
    if (canvas && canvas.width === screen.width && canvas.height === screen.height) {
      const r = canvas.getBoundingClientRect();
      return { left: r.left, top: r.top, width: r.width, height: r.height };
    }
    const r = stage.getBoundingClientRect();
    return fitContain({ left: r.left, top: r.top, width: r.width, height: r.height }, screen);
  }, [screen, stream.state, vncTarget]);

  // Keep the overlay on the drawn desktop when the window, the stage or the stream changes.
  useLayoutEffect(() => {
    const stage = stageRef.current;
    if (!stage) return;
    const update = () => {
      const page = drawnOnPage();
      const origin = stage.getBoundingClientRect();
      setDrawn(page && { left: page.left - origin.left, top: page.top - origin.top, width: page.width, height: page.height });
    };
    update();
    const observer = new ResizeObserver(update);
    observer.observe(stage);
    const canvas = vncTarget?.querySelector("canvas");
    if (canvas) observer.observe(canvas);
    // noVNC rescales on its own frame-size changes; a light poll catches those.
    const poll = window.setInterval(update, 500);
    return () => {
      observer.disconnect();
      window.clearInterval(poll);
    };
  }, [drawnOnPage, vncTarget]);

  function click(event: MouseEvent<HTMLDivElement>) {
    const page = drawnOnPage();
    if (!page || !screen) return;
    const at = { x: event.clientX, y: event.clientY };
    if (!isOnScreen(at, page)) return;
    onPick(clientToScreen(at, page, screen));
  }

  const live = stream.state === "live";
  return (
    <div className="desktop-stage" ref={stageRef} data-stream={stream.state}>
      {screenshotUrl && !live ? (
        <StillScreen url={screenshotUrl} />
      ) : null}
      <div className={`desktop-vnc${live ? "" : " hidden"}`} ref={setVncTarget} data-testid="desktop-vnc" />
      {drawn && screen && proposal ? (
        <ActionOverlay action={proposal} screen={screen} box={drawn} kind="proposal" faded={draft !== null} />
      ) : null}
      {drawn && screen && draft ? <ActionOverlay action={draft} screen={screen} box={drawn} kind="draft" /> : null}
      {control ? null : (
        <div
          className={`desktop-clicks${picking ? " picking" : ""}`}
          data-testid="desktop-clicks"
          onClick={click}
          role="presentation"
          title="Click to set the point of your correction"
        />
      )}
      {live && control && stream.error ? (
        <p className="stream-note" role="alert" data-testid="input-refused">
          {stream.error}
        </p>
      ) : null}
      {!live && streaming ? (
        <p className="stream-note" role="status">
          {stream.state === "connecting"
            ? "Connecting to the live desktop…"
            : stream.state === "closed"
              ? "The live desktop is not streamed (showing the last observation)."
              : "Live desktop lost: reconnecting… (showing the last observation)"}
          {stream.error ? ` ${stream.error}` : ""}
        </p>
      ) : null}
    </div>
  );
}
