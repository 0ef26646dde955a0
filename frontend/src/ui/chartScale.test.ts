import { describe, expect, it } from "vitest";
import { linePaths, niceMax } from "./chartScale";

describe("niceMax", () => {
  it("gives four whole-number steps for small counts", () => {
    expect(niceMax(0)).toBe(4);
    expect(niceMax(3)).toBe(4);
    expect(niceMax(5)).toBe(8);
    expect(niceMax(7)).toBe(8);
  });

  it("rounds large counts up to 1, 2 or 5 times a power of ten per step", () => {
    expect(niceMax(9)).toBe(20);
    expect(niceMax(37)).toBe(40);
    expect(niceMax(41)).toBe(80);
    expect(niceMax(950)).toBe(2000);
    expect(niceMax(1000)).toBe(2000);
  });

  it("always holds the value", () => {
    for (const v of [1, 2, 11, 99, 123, 4567]) expect(niceMax(v)).toBeGreaterThanOrEqual(v);
  });
});

describe("linePaths", () => {
  const x = (i: number) => i * 10;
  const y = (v: number) => 100 - v * 100;

  it("draws one run through consecutive values", () => {
    expect(linePaths([0, 0.5, 1], x, y)).toEqual(["M0.0,100.0L10.0,50.0L20.0,0.0"]);
  });

  it("breaks the line where a bucket has no value", () => {
    expect(linePaths([1, null, null, 0.5, 0.25], x, y)).toEqual([
      "M0.0,0.0",
      "M30.0,50.0L40.0,75.0",
    ]);
  });

  it("draws nothing without values", () => {
    expect(linePaths([null, null], x, y)).toEqual([]);
  });
});
