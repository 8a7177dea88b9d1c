// Parallel coordinates: one vertical axis per chosen key, one line per run
// through its values, coloured by a chosen key. Dragging along an axis
// brushes a range; a run outside any brush fades, and the page's table keeps
// only the runs inside every brush. SVG (each run a <path data-run-id> with
// its name as a tooltip; click opens it), so what is drawn can be read back.
// Runs without a key cross that axis on the "missing" row under the axes.
import { type Axis, type Brush, type Cell, colourOf } from './axes.js';
import { svg, svgText } from './svg.js';

export interface PlotRun { id: string; name: string }

export interface ParallelInput {
  runs: PlotRun[];
  axes: Axis[];
  /** Per axis, the runs' values in `runs` order. */
  values: Cell[][];
  colour: { axis: Axis | null; values: Cell[] };
  brushes: Map<string, Brush>;
  onBrush: (key: string, brush: Brush | null) => void;
  open: (id: string) => void;
}

const TOP = 34, BOTTOM = 46, SIDE = 70, HEIGHT = 380;

export function parallelCoordinates(width: number, p: ParallelInput): { el: SVGSVGElement; restyle: (inside: Uint8Array) => void } {
  const n = p.axes.length;
  const w = Math.max(width, 200);
  const plotH = HEIGHT - TOP - BOTTOM;
  const xOf = (i: number) => (n === 1 ? w / 2 : SIDE + (i * (w - 2 * SIDE)) / (n - 1));
  const yOf = (pos: number | null) => (pos === null ? TOP + plotH + 24 : TOP + (1 - pos) * plotH);
  const root = svg('svg', { width: String(w), height: String(HEIGHT), class: 'parallel', role: 'img', 'aria-label': `parallel coordinates of ${p.runs.length} runs over ${n} axes` });
  const lines = svg('g', { class: 'pc-lines' });
  const paths: SVGPathElement[] = [];
  for (let r = 0; r < p.runs.length; r++) {
    let d = '';
    for (let i = 0; i < n; i++) {
      const y = yOf(p.axes[i].pos(p.values[i][r]));
      d += `${i === 0 ? 'M' : 'L'}${xOf(i).toFixed(1)} ${y.toFixed(1)}`;
    }
    const run = p.runs[r];
    const path = svg('path', { d, stroke: colourOf(p.colour.axis, p.colour.values[r]), 'data-run-id': run.id, class: 'pc-line' }, svg('title', {}, run.name || run.id));
    path.addEventListener('click', () => p.open(run.id));
    paths.push(path);
    lines.append(path);
  }
  root.append(lines);
  root.append(svgText(8, TOP + plotH + 28, 'missing', { class: 'pc-missing-label' }));
  for (let i = 0; i < n; i++) root.append(axisGroup(p.axes[i], xOf(i), plotH, p));
  const restyle = (inside: Uint8Array) => {
    for (let r = 0; r < paths.length; r++) paths[r].classList.toggle('dim', inside[r] === 0);
  };
  return { el: root, restyle };

  function axisGroup(axis: Axis, x: number, h: number, input: ParallelInput): SVGGElement {
    const g = svg('g', { class: 'pc-axis', 'data-key': axis.key, 'data-kind': axis.kind, transform: `translate(${x.toFixed(1)},0)` });
    g.append(svg('line', { x1: '0', x2: '0', y1: String(TOP), y2: String(TOP + h), class: 'pc-axis-line' }));
    const title = svgText(0, TOP - 16, axis.key.length > 28 ? `${axis.key.slice(0, 27)}…` : axis.key, { class: 'pc-axis-title', 'text-anchor': 'middle' });
    title.append(svg('title', {}, axis.key + (axis.mixed ? ' (numbers and text: shown as text)' : '') + (axis.missing ? `; ${axis.missing} runs without it` : '')));
    g.append(title);
    for (const t of axis.ticks()) {
      const y = yOf(t.at);
      g.append(svg('line', { x1: '-4', x2: '0', y1: y.toFixed(1), y2: y.toFixed(1), class: 'pc-tick' }));
      const label = t.label.length > 16 ? `${t.label.slice(0, 15)}…` : t.label;
      g.append(svgText(-6, y + 4, label, { class: 'pc-tick-label', 'text-anchor': 'end' }));
    }
    // The brush: drag along the axis; a click without a drag clears it.
    const brushRect = svg('rect', { x: '-9', width: '18', class: 'pc-brush', visibility: 'hidden' });
    const hit = svg('rect', { x: '-14', width: '28', y: String(TOP - 4), height: String(h + 8), class: 'pc-brush-hit', 'data-key': axis.key });
    const show = (b: Brush | null) => {
      if (!b) return brushRect.setAttribute('visibility', 'hidden');
      const y1 = yOf(Math.max(b.lo, b.hi)), y2 = yOf(Math.min(b.lo, b.hi));
      brushRect.setAttribute('y', y1.toFixed(1));
      brushRect.setAttribute('height', Math.max(2, y2 - y1).toFixed(1));
      brushRect.setAttribute('visibility', 'visible');
    };
    show(input.brushes.get(axis.key) ?? null);
    const posAt = (ev: PointerEvent) => {
      const box = root.getBoundingClientRect();
      const y = ev.clientY - box.top;
      return Math.min(1, Math.max(0, 1 - (y - TOP) / h));
    };
    let start: number | null = null, moved = false;
    hit.addEventListener('pointerdown', (ev) => {
      start = posAt(ev);
      moved = false;
      hit.setPointerCapture(ev.pointerId);
    });
    hit.addEventListener('pointermove', (ev) => {
      if (start === null) return;
      const at = posAt(ev);
      if (Math.abs(at - start) * h < 3 && !moved) return;
      moved = true;
      show({ key: axis.key, lo: start, hi: at });
    });
    hit.addEventListener('pointerup', (ev) => {
      if (start === null) return;
      const at = posAt(ev);
      const b = moved ? { key: axis.key, lo: Math.min(start, at), hi: Math.max(start, at) } : null;
      start = null;
      show(b);
      input.onBrush(axis.key, b);
    });
    g.append(brushRect, hit);
    return g;
  }
}
