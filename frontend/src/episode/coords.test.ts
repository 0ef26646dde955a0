import { describe, expect, it } from "vitest";
import { clientToScreen, cssToDevice, fitContain, isOnScreen, screenToClient } from "./coords";

const FULL_HD = { width: 1920, height: 1080 };

describe("fitContain", () => {
  it("fills a stage of the same aspect ratio", () => {
    const drawn = fitContain({ left: 0, top: 0, width: 960, height: 540 }, FULL_HD);
    expect(drawn).toEqual({ left: 0, top: 0, width: 960, height: 540, scale: 0.5 });
  });

  it("letterboxes a wide screen in a tall stage (bars above and below)", () => {
    const drawn = fitContain({ left: 10, top: 20, width: 800, height: 800 }, FULL_HD);
    expect(drawn.width).toBeCloseTo(800);
    expect(drawn.height).toBeCloseTo(450);
    expect(drawn.left).toBeCloseTo(10);
    expect(drawn.top).toBeCloseTo(20 + 175);
  });

  it("pillarboxes a screen in a wide stage (bars left and right)", () => {
    const drawn = fitContain({ left: 0, top: 0, width: 1000, height: 300 }, { width: 800, height: 600 });
    expect(drawn.scale).toBeCloseTo(0.5);
    expect(drawn.left).toBeCloseTo(300);
    expect(drawn.top).toBeCloseTo(0);
  });

  it("refuses a screen without pixels", () => {
    expect(() => fitContain({ left: 0, top: 0, width: 10, height: 10 }, { width: 0, height: 5 })).toThrow();
  });
});

describe("clientToScreen", () => {
  it("maps at scale 1", () => {
    const drawn = { left: 100, top: 50, width: 1280, height: 800 };
    expect(clientToScreen({ x: 100, y: 50 }, drawn, { width: 1280, height: 800 })).toEqual({ x: 0, y: 0 });
    expect(clientToScreen({ x: 740.9, y: 450.2 }, drawn, { width: 1280, height: 800 })).toEqual({ x: 640, y: 400 });
  });

  it("maps at a fractional scale (1366-wide window showing a 1920 screen)", () => {
    const drawn = fitContain({ left: 0, top: 60, width: 1013.7, height: 640 }, FULL_HD);
    const scale = drawn.scale;
    expect(scale).toBeCloseTo(1013.7 / 1920);
    for (const pixel of [{ x: 0, y: 0 }, { x: 1, y: 1 }, { x: 959, y: 539 }, { x: 1919, y: 1079 }, { x: 1234, y: 77 }]) {
      // The middle of a pixel maps back to that pixel whatever the scale.
      expect(clientToScreen(screenToClient(pixel, drawn, FULL_HD), drawn, FULL_HD)).toEqual(pixel);
    }
  });

  it("maps at an enlarging scale (a small screen on a large stage)", () => {
    const screen = { width: 800, height: 600 };
    const drawn = fitContain({ left: 0, top: 0, width: 2000, height: 1500 }, screen);
    expect(drawn.scale).toBe(2.5);
    expect(clientToScreen({ x: 2.4, y: 2.4 }, drawn, screen)).toEqual({ x: 0, y: 0 });
    expect(clientToScreen({ x: 2.5, y: 4.99 }, drawn, screen)).toEqual({ x: 1, y: 1 });
    expect(clientToScreen({ x: 1999.9, y: 1499.9 }, drawn, screen)).toEqual({ x: 799, y: 599 });
  });

  it("clamps points on the letterbox bars and past the edges to the screen", () => {
    const drawn = fitContain({ left: 0, top: 0, width: 800, height: 800 }, FULL_HD);
    const above = { x: 400, y: 10 };
    expect(isOnScreen(above, drawn)).toBe(false);
    expect(clientToScreen(above, drawn, FULL_HD)).toEqual({ x: 960, y: 0 });
    expect(clientToScreen({ x: -50, y: 1000 }, drawn, FULL_HD)).toEqual({ x: 0, y: 1079 });
    expect(clientToScreen({ x: 800, y: 400 }, drawn, FULL_HD).x).toBe(1919);
    expect(isOnScreen({ x: 400, y: 400 }, drawn)).toBe(true);
  });

  it("is independent of devicePixelRatio: CSS pixels in, screen pixels out", () => {
    // A 2x HiDPI display reports the same CSS box and event positions as a 1x one.
    const drawn = { left: 0, top: 0, width: 683, height: 384.1875 };
    const a = clientToScreen({ x: 341.5, y: 192 }, drawn, FULL_HD);
    expect(a).toEqual({ x: 960, y: 539 });
  });
});

describe("cssToDevice", () => {
  it("scales CSS offsets to a HiDPI backing store", () => {
    const box = { left: 10, top: 20, width: 400, height: 300 };
    expect(cssToDevice({ x: 10, y: 20 }, box, 2)).toEqual({ x: 0, y: 0 });
    expect(cssToDevice({ x: 110, y: 70 }, box, 2)).toEqual({ x: 200, y: 100 });
    expect(cssToDevice({ x: 110, y: 70 }, box, 1.25)).toEqual({ x: 125, y: 63 });
  });

  it("round-trips with the screen mapping on a 1.5x display", () => {
    const screen = { width: 1280, height: 800 };
    const drawn = fitContain({ left: 0, top: 0, width: 1000, height: 700 }, screen);
    const pixel = { x: 1000, y: 700 };
    const css = screenToClient(pixel, drawn, screen);
    const device = cssToDevice(css, drawn, 1.5);
    // The device pixel is within one device pixel of the CSS point scaled by the ratio.
    expect(Math.abs(device.x - (css.x - drawn.left) * 1.5)).toBeLessThanOrEqual(0.5);
    expect(clientToScreen(css, drawn, screen)).toEqual(pixel);
  });
});
