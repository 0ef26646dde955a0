/**
 * Charts drawn as plain SVG: grouped bars (throughput per annotator) and lines (acceptance
 * rate per model version, a fine-tuning job's loss curve). The x axis is a list of labelled
 * positions (time buckets, training steps). Each chart has a text legend and its numbers in a
 * table or text beside it, so nothing is shown by colour alone.
 */
import type { ReactNode } from "react";
import { linePaths, niceMax } from "./chartScale";

export const PALETTE = ["#1f4fb8", "#b35900", "#176b2c", "#8a1f9c", "#a3171e", "#00687a"];

const WIDTH = 720;
const HEIGHT = 240;
const PAD = { left: 44, right: 12, top: 12, bottom: 40 };

export interface ChartSeries {
  name: string;
  values: (number | null)[];
}

/** The labels of time buckets (UTC), for a chart's x axis. */
export function bucketLabels(buckets: string[], bucket: "hour" | "day"): string[] {
  return buckets.map((iso) => {
    const d = new Date(iso);
    return bucket === "day"
      ? d.toLocaleDateString(undefined, { month: "short", day: "numeric", timeZone: "UTC" })
      : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", timeZone: "UTC" });
  });
}

function Axes({ labels, max, format }: { labels: string[]; max: number; format: (v: number) => string }) {
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const every = Math.max(1, Math.ceil(labels.length / 8));
  const ticks = [0, 0.25, 0.5, 0.75, 1];
  return (
    <g className="axes">
      {ticks.map((t) => {
        const y = PAD.top + plotH * (1 - t);
        return (
          <g key={t}>
            <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y} y2={y} stroke="#d9dde5" />
            <text x={PAD.left - 6} y={y + 4} textAnchor="end" fontSize="11" fill="#4a5263">
              {format(max * t)}
            </text>
          </g>
        );
      })}
      {labels.map((label, i) =>
        i % every === 0 ? (
          <text
            key={i}
            x={PAD.left + (plotW * (i + 0.5)) / labels.length}
            y={HEIGHT - PAD.bottom + 16}
            textAnchor="middle"
            fontSize="11"
            fill="#4a5263"
          >
            {label}
          </text>
        ) : null,
      )}
      <line x1={PAD.left} x2={PAD.left} y1={PAD.top} y2={HEIGHT - PAD.bottom} stroke="#4a5263" />
    </g>
  );
}

function Legend({ series }: { series: ChartSeries[] }) {
  return (
    <ul className="legend" aria-hidden="true">
      {series.map((s, i) => (
        <li key={s.name}>
          <span className="swatch" style={{ background: PALETTE[i % PALETTE.length] }} />
          {s.name}
        </li>
      ))}
    </ul>
  );
}

/** One group of bars per x position, one bar per series. */
export function BarChart({
  title,
  labels,
  series,
  testId,
}: {
  title: string;
  labels: string[];
  series: ChartSeries[];
  testId?: string;
}) {
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values.map((v) => v ?? 0))));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const groupW = plotW / Math.max(1, labels.length);
  const barW = Math.max(1, (groupW * 0.8) / Math.max(1, series.length));
  return (
    <figure className="chart" data-testid={testId}>
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={title}>
        <Axes labels={labels} max={max} format={(v) => String(Math.round(v))} />
        {series.map((s, si) =>
          s.values.map((v, bi) => {
            if (!v) return null;
            const h = (plotH * v) / max;
            return (
              <rect
                key={`${s.name}-${bi}`}
                x={PAD.left + groupW * bi + groupW * 0.1 + barW * si}
                y={PAD.top + plotH - h}
                width={barW}
                height={h}
                fill={PALETTE[si % PALETTE.length]}
              >
                <title>{`${s.name}, ${labels[bi]}: ${v}`}</title>
              </rect>
            );
          }),
        )}
      </svg>
      <Legend series={series} />
    </figure>
  );
}

/** One line per series over the x positions; gaps where a position has no value. Dots mark
 * each value (with its number as a tooltip) unless `dots` is off, for long series. */
export function LineChart({
  title,
  labels,
  series,
  max = 1,
  format = (v: number) => `${Math.round(v * 100)}%`,
  dots = true,
  testId,
  children,
}: {
  title: string;
  labels: string[];
  series: ChartSeries[];
  max?: number;
  format?: (v: number) => string;
  dots?: boolean;
  testId?: string;
  children?: ReactNode;
}) {
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number) => PAD.left + (plotW * (i + 0.5)) / Math.max(1, labels.length);
  const y = (v: number) => PAD.top + plotH * (1 - v / max);
  return (
    <figure className="chart" data-testid={testId}>
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={title}>
        <Axes labels={labels} max={max} format={format} />
        {series.map((s, si) => {
          const colour = PALETTE[si % PALETTE.length];
          const runs = linePaths(s.values, x, y);
          return (
            <g key={s.name}>
              {runs.map((d) => (
                <path key={d} d={d} fill="none" stroke={colour} strokeWidth="2.5" />
              ))}
              {s.values.map((v, i) =>
                v === null || !dots ? null : (
                  <circle key={i} cx={x(i)} cy={y(v)} r="4" fill={colour}>
                    <title>{`${s.name}, ${labels[i]}: ${format(v)}`}</title>
                  </circle>
                ),
              )}
            </g>
          );
        })}
      </svg>
      <Legend series={series} />
      {children}
    </figure>
  );
}
