/**
 * An action drawn on the desktop: a marker where it clicks, an arrow for a drag, a chevron for
 * a scroll, a caption for text and keys. Drawn in screen pixels (the SVG's viewBox is the
 * screen), so it sits on the desktop at any scale.
 */
import type { Box, Size } from "./coords";
import { describe } from "../pages/annotator/actions";
import type { Action } from "../domain/actions";

const ARROW: Record<string, [number, number]> = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] };

/**
 * Where an action's caption goes, in screen pixels: never over what the action refers to, nor
 * over the menus, tabs and address bar programs keep along the top. A caption without a point
 * (typing, keys, finishing) sits at the bottom left; one with a point goes beside it, below it
 * in the top half of the screen and above it in the bottom half, and left of it near the right
 * edge.
 */
export function captionPlace(
  point: [number, number] | null,
  screen: { width: number; height: number },
  r: number,
  fontSize: number,
): { x: number; y: number; anchor: "start" | "end" } {
  if (!point) return { x: fontSize, y: screen.height - fontSize, anchor: "start" };
  const [x, y] = point;
  const right = x < screen.width * 0.75;
  const below = y < screen.height / 2;
  return {
    x: right ? x + r * 1.6 : x - r * 1.6,
    y: below ? y + r * 1.6 + fontSize : y - r * 1.6,
    anchor: right ? "start" : "end",
  };
}

export function ActionOverlay({
  action,
  screen,
  box,
  kind,
  faded = false,
}: {
  action: Action;
  screen: Size;
  box: Box;
  kind: "proposal" | "draft";
  /** Drawn fainter: the proposal while the annotator edits their own action. */
  faded?: boolean;
}) {
  // Sizes in screen pixels that stay about the same on the page whatever the scale.
  const unit = screen.width / Math.max(box.width, 1);
  const r = 14 * unit;
  const colour = kind === "proposal" ? "#ff3b7f" : "#19c37d";
  const stroke = { stroke: colour, strokeWidth: 3 * unit, fill: "none" };
  const [x, y] = action.point ? [action.point[0] + 0.5, action.point[1] + 0.5] : [screen.width / 2, screen.height / 2];
  const caption = describe(action);
  const showCaption = ["type", "hotkey", "wait", "finished", "call_user", "scroll", "drag", "open_app"].includes(action.type) || !action.point;
  const place = captionPlace(action.point ? [x, y] : null, screen, r, 18 * unit);
  return (
    <svg
      className="action-overlay"
      style={{ left: box.left, top: box.top, width: box.width, height: box.height, opacity: faded ? 0.45 : 1 }}
      viewBox={`0 0 ${screen.width} ${screen.height}`}
      preserveAspectRatio="none"
      aria-label={`${kind === "proposal" ? "Proposed" : "Your"} action: ${caption}`}
      role="img"
      data-testid={`overlay-${kind}`}
    >
      <defs>
        <marker id={`head-${kind}`} viewBox="0 0 10 10" refX="8" refY="5" markerWidth="5" markerHeight="5" orient="auto">
          <path d="M0,0 L10,5 L0,10 z" fill={colour} />
        </marker>
      </defs>
      {action.point ? (
        <g>
          <circle cx={x} cy={y} r={r} {...stroke} />
          <circle cx={x} cy={y} r={2.5 * unit} fill={colour} />
          {action.type === "left_double" ? <circle cx={x} cy={y} r={r * 1.5} {...stroke} /> : null}
          {action.type === "right_single" ? <rect x={x - r * 1.4} y={y - r * 1.4} width={r * 2.8} height={r * 2.8} {...stroke} /> : null}
        </g>
      ) : null}
      {action.type === "drag" && action.point && action.end ? (
        <line x1={x} y1={y} x2={action.end[0] + 0.5} y2={action.end[1] + 0.5} {...stroke} markerEnd={`url(#head-${kind})`} />
      ) : null}
      {action.type === "scroll" && action.point ? (
        <line
          x1={x}
          y1={y}
          x2={x + ARROW[action.direction ?? "down"][0] * r * 4}
          y2={y + ARROW[action.direction ?? "down"][1] * r * 4}
          {...stroke}
          markerEnd={`url(#head-${kind})`}
        />
      ) : null}
      {showCaption ? (
        <text
          x={place.x}
          y={place.y}
          textAnchor={place.anchor}
          fontSize={18 * unit}
          fill="#fff"
          stroke="#000"
          strokeWidth={4 * unit}
          paintOrder="stroke"
          fontFamily="system-ui, sans-serif"
        >
          {caption}
        </text>
      ) : null}
    </svg>
  );
}
