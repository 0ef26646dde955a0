/**
 * Where things are: the one mapping between what the browser shows (CSS pixels of the page)
 * and the desktop's screen pixels (what actions and observations are stored in).
 *
 * The desktop is drawn scaled to fit its stage and centred (letterboxed) with its aspect ratio
 * kept; any scale is possible, fractional ones included. Pointer events and bounding boxes are
 * in CSS pixels whatever the devicePixelRatio, so screen pixels are computed from CSS pixels
 * only; a HiDPI backing store (a canvas `devicePixelRatio` times larger than its CSS box) is
 * reached through `cssToDevice`. Screen points are whole pixels inside the screen: a pointer on
 * the letterbox bars, or a fraction past the last column, is clamped to the nearest edge pixel.
 */

export interface Size {
  width: number;
  height: number;
}

export interface Point {
  x: number;
  y: number;
}

/** A box in CSS pixels, like DOMRect: left/top from the page (or stage) origin. */
export interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** Where a `screen` is drawn inside `stage` when scaled to fit and centred. */
export function fitContain(stage: Box, screen: Size): Box & { scale: number } {
  if (screen.width <= 0 || screen.height <= 0) throw new RangeError("the screen has no pixels");
  const scale = Math.min(stage.width / screen.width, stage.height / screen.height);
  const width = screen.width * scale;
  const height = screen.height * scale;
  return {
    left: stage.left + (stage.width - width) / 2,
    top: stage.top + (stage.height - height) / 2,
    width,
    height,
    scale,
  };
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}

/** Whether a CSS point falls on the drawn desktop (not on the letterbox bars around it). */
export function isOnScreen(client: Point, drawn: Box): boolean {
  return (
    client.x >= drawn.left &&
    client.x < drawn.left + drawn.width &&
    client.y >= drawn.top &&
    client.y < drawn.top + drawn.height
  );
}

/** The screen pixel under a CSS point, clamped to the screen. */
export function clientToScreen(client: Point, drawn: Box, screen: Size): Point {
  const x = Math.floor(((client.x - drawn.left) * screen.width) / drawn.width);
  const y = Math.floor(((client.y - drawn.top) * screen.height) / drawn.height);
  return { x: clamp(x, 0, screen.width - 1), y: clamp(y, 0, screen.height - 1) };
}

/** The CSS point at the centre of a screen pixel (where to draw a marker for it). */
export function screenToClient(pixel: Point, drawn: Box, screen: Size): Point {
  return {
    x: drawn.left + ((pixel.x + 0.5) * drawn.width) / screen.width,
    y: drawn.top + ((pixel.y + 0.5) * drawn.height) / screen.height,
  };
}

/** A CSS point inside a box, on a backing store `devicePixelRatio` times denser. */
export function cssToDevice(client: Point, box: Box, devicePixelRatio: number): Point {
  return {
    x: Math.round((client.x - box.left) * devicePixelRatio),
    y: Math.round((client.y - box.top) * devicePixelRatio),
  };
}
