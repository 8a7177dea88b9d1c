// A scatter of one key against another (a config key or summary against a
// summary metric): each run a <circle data-run-id>, its name and values as a
// tooltip, click opens it; coloured as the parallel coordinates are. Runs
// without either key are left out (the caption counts them).
import { type Axis, type Cell, colourOf } from './axes.js';
import type { PlotRun } from './parallel.js';
import { svg, svgText } from './svg.js';

const W = 560, H = 380, LEFT = 70, RIGHT = 20, TOP = 16, BOTTOM = 50;

export interface ScatterInput {
  runs: PlotRun[];
  x: { axis: Axis; values: Cell[] };
  y: { axis: Axis; values: Cell[] };
  colour: { axis: Axis | null; values: Cell[] };
  open: (id: string) => void;
}

export function scatter(p: ScatterInput): { el: SVGSVGElement; restyle: (inside: Uint8Array) => void; left: number } {
  const plotW = W - LEFT - RIGHT, plotH = H - TOP - BOTTOM;
  const root = svg('svg', { width: String(W), height: String(H), class: 'scatter', role: 'img', 'aria-label': `${p.y.axis.key} against ${p.x.axis.key}` });
  root.append(svg('rect', { x: String(LEFT), y: String(TOP), width: String(plotW), height: String(plotH), class: 'sc-frame' }));
  for (const t of p.x.axis.ticks()) {
    const x = LEFT + t.at * plotW;
    root.append(svg('line', { x1: x.toFixed(1), x2: x.toFixed(1), y1: String(TOP + plotH), y2: String(TOP + plotH + 4), class: 'pc-tick' }));
    root.append(svgText(x, TOP + plotH + 16, t.label.length > 14 ? `${t.label.slice(0, 13)}…` : t.label, { class: 'pc-tick-label sc-x-tick', 'text-anchor': 'middle' }));
  }
  for (const t of p.y.axis.ticks()) {
    const y = TOP + (1 - t.at) * plotH;
    root.append(svg('line', { x1: String(LEFT - 4), x2: String(LEFT), y1: y.toFixed(1), y2: y.toFixed(1), class: 'pc-tick' }));
    root.append(svgText(LEFT - 6, y + 4, t.label.length > 10 ? `${t.label.slice(0, 9)}…` : t.label, { class: 'pc-tick-label sc-y-tick', 'text-anchor': 'end' }));
  }
  root.append(svgText(LEFT + plotW / 2, H - 8, p.x.axis.key, { class: 'sc-axis-title', 'text-anchor': 'middle' }));
  root.append(svgText(12, TOP + plotH / 2, p.y.axis.key, { class: 'sc-axis-title', 'text-anchor': 'middle', transform: `rotate(-90 12 ${TOP + plotH / 2})` }));
  const dots: Array<SVGCircleElement | null> = [];
  let left = 0;
  const g = svg('g', { class: 'sc-points' });
  for (let r = 0; r < p.runs.length; r++) {
    const px = p.x.axis.pos(p.x.values[r]), py = p.y.axis.pos(p.y.values[r]);
    if (px === null || py === null) {
      dots.push(null);
      left++;
      continue;
    }
    const run = p.runs[r];
    const dot = svg('circle', {
      cx: (LEFT + px * plotW).toFixed(1), cy: (TOP + (1 - py) * plotH).toFixed(1), r: '4', fill: colourOf(p.colour.axis, p.colour.values[r]),
      class: 'sc-point', 'data-run-id': run.id,
    }, svg('title', {}, `${run.name || run.id}\n${p.x.axis.key} = ${String(p.x.values[r])}\n${p.y.axis.key} = ${String(p.y.values[r])}`));
    dot.addEventListener('click', () => p.open(run.id));
    dots.push(dot);
    g.append(dot);
  }
  root.append(g);
  const restyle = (inside: Uint8Array) => {
    for (let r = 0; r < dots.length; r++) dots[r]?.classList.toggle('dim', inside[r] === 0);
  };
  return { el: root, restyle, left };
}
