// Time-series line charts drawn as SVG: one line per series, a point per sample (with its
// value as a tooltip), a time axis, a value axis from zero, and a legend.

import { formatNumber, svg } from "./dom.js";

const WIDTH = 960;
const HEIGHT = 280;
const MARGIN = { top: 12, right: 16, bottom: 28, left: 56 };
export const SERIES_CLASSES = 12; // series-0 .. series-11 in console.css

function niceStep(span, ticks) {
  const raw = span / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const scaled = raw / power;
  return (scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 5 ? 5 : 10) * power;
}

function shortDate(time) {
  return new Date(time).toISOString().slice(5, 10);
}

/**
 * series: [{name, points: [{time: ms since 1970, value: number}]}], sorted by time; span:
 * [first, last] of the time axis (else the points').
 * Returns an <svg> (class "chart") or null when no series has a point.
 */
export function lineChart(series, label, span) {
  const points = series.flatMap((each) => each.points);
  if (points.length === 0) return null;
  const times = points.map((p) => p.time);
  // The window asked for, so that charts of one page share their time axis.
  let [first, last] = span || [Math.min(...times), Math.max(...times)];
  if (first === last) [first, last] = [first - 43200000, last + 43200000]; // half a day each side
  const top = Math.max(...points.map((p) => p.value), 1);
  const step = niceStep(top, 4);
  const ceiling = Math.ceil(top / step) * step;
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (time) => MARGIN.left + ((time - first) / (last - first)) * plotWidth;
  const y = (value) => MARGIN.top + plotHeight - (value / ceiling) * plotHeight;

  const grid = [];
  for (let value = 0; value <= ceiling + step / 2; value += step) {
    grid.push(
      svg("line", { class: "grid", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(value), y2: y(value) }),
      svg("text", { class: "tick", x: MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end" }, formatNumber(value)),
    );
  }
  // A few samples: a tick under each, so that a label never names the next day under a
  // late-evening sample. More: whole days, a round number of them apart.
  const sampled = [...new Set(times)].sort((a, b) => a - b);
  let tickTimes = sampled;
  if (sampled.length > 8) {
    const tickEvery = Math.max(1, niceStep((last - first) / 86400000, 6)) * 86400000;
    tickTimes = [];
    for (let time = Math.ceil(first / tickEvery) * tickEvery; time <= last; time += tickEvery) tickTimes.push(time);
  }
  const dayTicks = tickTimes.map((time) =>
    svg("text", { class: "tick", x: x(time), y: HEIGHT - 8, "text-anchor": "middle" }, shortDate(time)),
  );
  const lines = series.map((each, index) => {
    const colour = `series-${index % SERIES_CLASSES}`;
    const path = each.points.map((p) => `${x(p.time).toFixed(1)},${y(p.value).toFixed(1)}`).join(" ");
    return svg(
      "g",
      { class: `series ${colour}`, "data-series": each.name },
      svg("polyline", { points: path }),
      each.points.map((p) =>
        svg(
          "circle",
          { class: "point", cx: x(p.time).toFixed(1), cy: y(p.value).toFixed(1), r: 3 },
          svg("title", {}, `${each.name.replace(/_/g, " ")}: ${formatNumber(p.value)} at ${new Date(p.time).toISOString()}`),
        ),
      ),
    );
  });
  return svg(
    "svg",
    { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": label },
    svg("title", {}, label),
    grid,
    svg("line", { class: "axis", x1: MARGIN.left, x2: MARGIN.left, y1: MARGIN.top, y2: HEIGHT - MARGIN.bottom }),
    svg("line", { class: "axis", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: HEIGHT - MARGIN.bottom, y2: HEIGHT - MARGIN.bottom }),
    dayTicks,
    lines,
  );
}
