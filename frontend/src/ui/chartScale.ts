/** The arithmetic of the SVG charts, apart from React so it can be unit-tested. */

/** The top of a count axis: four equal whole-number steps that hold `value`. */
export function niceMax(value: number): number {
  const quarter = Math.max(1, value / 4);
  const power = 10 ** Math.floor(Math.log10(quarter));
  for (const step of [1, 2, 5, 10]) if (quarter <= step * power) return 4 * step * power;
  return 40 * power;
}

/** SVG path data for a line over `values`, broken into runs where a value is missing. */
export function linePaths(
  values: (number | null)[],
  x: (index: number) => number,
  y: (value: number) => number,
): string[] {
  const runs: string[] = [];
  let run = "";
  values.forEach((v, i) => {
    if (v === null) {
      if (run) runs.push(run);
      run = "";
    } else {
      run += `${run ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    }
  });
  if (run) runs.push(run);
  return runs;
}
