import { describe, expect, it } from "vitest";
import { captionPlace } from "./ActionOverlay";

const screen = { width: 1280, height: 800 };

describe("captionPlace", () => {
  it("puts a caption without a point at the bottom left, away from menus and the address bar", () => {
    const place = captionPlace(null, screen, 14, 18);
    expect(place.y).toBeGreaterThan(screen.height - 40);
    expect(place.x).toBeLessThan(40);
  });

  it("puts a caption below a point in the top half, so it never covers the menu bar beside it", () => {
    const place = captionPlace([300, 20], screen, 14, 18);
    expect(place.y).toBeGreaterThan(20 + 14);
  });

  it("puts it above a point in the bottom half and left of one near the right edge", () => {
    const place = captionPlace([1200, 700], screen, 14, 18);
    expect(place.y).toBeLessThan(700);
    expect(place.anchor).toBe("end");
    expect(place.x).toBeLessThan(1200);
  });
});
