// One chart: uPlot, drawn when it scrolls into view (IntersectionObserver),
// so a page of thousands of metrics only draws what is seen. x is step, wall
// time or time since the run's start; smoothing is an EMA debiased as TensorBoard does it; a log scale
// drops values <= 0; a downsampled series (or a group's spread) draws its
// min–max band so spikes inside a bucket still show. Markers (a run's attempt
// boundaries) are dashed vertical lines laid over the plot as elements, placed
// again whenever the x scale changes (zoom, resize).
import uPlot from 'uplot';
import { h, clear } from './dom.js';
import type { ChartSeries } from './api.js';
import { ema } from './smoothing.js';

export interface Line {
  label: string;
  data: ChartSeries;
  /** Draw data.min/data.max as a band around the line (when present). */
  band?: boolean;
  /** Unix seconds the line's relative time counts from (its run's start); its first point when absent. */
  start?: number;
  /** Rows a later attempt's rewind superseded: drawn faint and dashed, never smoothed or banded. */
  superseded?: boolean;
  /** Its colour, instead of the next of the palette (a superseded line takes its metric's). */
  color?: string;
}

/**
 * A dashed vertical line across the plot with a short label (an attempt
 * boundary): at `step` on the step axis, at `time` (Unix seconds) on the time
 * axes. `attrs` go on its element (data-* for people and tests).
 */
export interface Marker {
  label: string;
  title: string;
  step: number;
  time: number;
  attrs?: Record<string, string>;
}

export type XAxis = 'step' | 'time' | 'relative';
export const X_LABELS: Record<XAxis, string> = { step: 'step', time: 'wall time', relative: 'relative time' };

export interface ChartOptions {
  x: XAxis;
  /** 0 (off) to 0.999. */
  smoothing: number;
  log: boolean;
  /** Each value holds from the previous point to its own (a rate over an interval), drawn as steps; unsmoothed lines only. */
  stepped?: boolean;
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
export const color = (i: number) => COLORS[i % COLORS.length];

/** Puts several series on one sorted x array (uPlot's data shape), null where a series has no point. */
export function align(cols: Array<{ x: number[]; ys: Array<Array<number | null>> }>): uPlot.AlignedData {
  const xs = new Set<number>();
  for (const c of cols) for (const x of c.x) xs.add(x);
  const x = Float64Array.from(xs).sort();
  const at = new Map<number, number>();
  x.forEach((v, i) => at.set(v, i));
  const out: Array<Array<number | null>> = [];
  for (const c of cols) {
    for (const y of c.ys) {
      const col = new Array<number | null>(x.length).fill(null);
      for (let i = 0; i < c.x.length; i++) col[at.get(c.x[i])!] = y[i] ?? null;
      out.push(col);
    }
  }
  return [Array.from(x), ...out] as uPlot.AlignedData;
}

function positive(ys: Array<number | null>): Array<number | null> {
  return ys.map((v) => (v !== null && v > 0 ? v : null));
}

/**
 * Seconds as a short duration: 0.25s, 45s, 12m 05s, 3h 20m, 2d 4h. `digits`:
 * decimals below a minute (an axis passes what its tick spacing needs).
 */
export function duration(sec: number, digits = Math.abs(sec) < 10 && !Number.isInteger(sec) ? 2 : 0): string {
  const sign = sec < 0 ? '-' : '';
  const a = Math.abs(sec);
  if (a < 60) return `${sign}${digits > 0 ? a.toFixed(digits) : Math.round(a)}s`;
  const s = Math.round(a);
  if (s < 3600) return `${sign}${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${sign}${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${sign}${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** Tick labels of a relative-time axis: as many decimals as the spacing of the ticks needs. */
function durationTicks(_u: uPlot, splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) : 1;
  const digits = step > 0 && step < 1 ? Math.min(3, Math.ceil(-Math.log10(step) - 1e-9)) : 0;
  return splits.map((v) => duration(v, digits));
}

/**
 * Tick labels of a value axis: the fewest decimals (up to 12) that tell every
 * tick apart and write each within 1 % of the tick spacing of its value, so a
 * flat series at 17.848 reads 17.846, 17.848, 17.85 rather than three 17.8s;
 * exponents past a million or below 0.0001. Each tick exactly where uPlot put it.
 */
export function valueTicks(splits: number[]): string[] {
  const finite = splits.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return splits.map(String);
  const step = finite.length > 1 ? Math.min(...finite.slice(1).map((v, i) => Math.abs(v - finite[i])).filter((d) => d > 0)) : Math.abs(finite[0]) || 1;
  const big = Math.max(...finite.map(Math.abs));
  const exp = big >= 1e6 || (big > 0 && big < 1e-4);
  for (let d = 0; d <= 12; d++) {
    const labels = splits.map((v) => (exp ? v.toExponential(d).replace('e+', 'e') : v.toFixed(d)));
    const close = splits.every((v, i) => !Number.isFinite(step) || Math.abs(Number(labels[i].replace(/e(\d)/, 'e+$1')) - v) <= step * 0.01 + Number.EPSILON * Math.abs(v));
    if (close && new Set(labels).size === labels.length) return labels.map((l) => (l === '-0' || /^-0\.0*$/.test(l) ? l.slice(1) : l));
  }
  return splits.map((v) => String(v));
}

/**
 * The y range: uPlot's (10 % padding, zero kept in view when near), except
 * for a flat series, which gets ±0.5 % around its value: a constant 249.05
 * reads 248 to 250, not 0 to 500.
 */
function yRange(_u: uPlot, min: number, max: number): uPlot.Range.MinMax {
  if (min == null || max == null) return [min, max];
  if (min === max && Number.isFinite(min)) {
    const d = min === 0 ? 1 : Math.abs(min) * 0.005;
    return [min - d, max + d];
  }
  return uPlot.rangeNum(min, max, 0.1, true);
}

/** The pixels a value axis needs for its widest label (uPlot's axis font), with room for the ticks. */
let measurer: CanvasRenderingContext2D | null = null;
function labelWidth(labels: string[]): number {
  measurer ??= document.createElement('canvas').getContext('2d');
  if (!measurer) return 8 * Math.max(0, ...labels.map((l) => l.length));
  measurer.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif';
  return Math.ceil(Math.max(0, ...labels.map((l) => measurer!.measureText(l).width)));
}

/** A line's x values for the axis asked. */
function xsOf(l: Line, x: XAxis): number[] {
  if (x === 'step') return l.data.step;
  if (x === 'time') return l.data.time;
  const t0 = l.start ?? (l.data.time.length ? Math.min(...l.data.time) : 0);
  return l.data.time.map((t) => t - t0);
}

/**
 * The x range uPlot draws. A single x (a run with one system sample, or one
 * step) gets a small range around it: uPlot's own range for a single time
 * spans 1000 days.
 */
function xRange(x: XAxis, xs: ArrayLike<number>) {
  const pad = x === 'step' ? 1 : 5;
  const single = xs.length > 0 && xs[0] === xs[xs.length - 1] ? xs[0] : null;
  return (_u: uPlot, min: number, max: number): uPlot.Range.MinMax => {
    if (single !== null) return [single - pad, single + pad];
    return [min, max];
  };
}

export function draw(el: HTMLElement, title: string, lines: Line[], o: ChartOptions, markers: Marker[] = []): uPlot {
  clear(el);
  const cols: Array<{ x: number[]; ys: Array<Array<number | null>> }> = [];
  const series: uPlot.Series[] = [{ label: X_LABELS[o.x], ...(o.x === 'relative' ? { value: (_u: uPlot, v: number | null) => (v === null ? '' : duration(v)) } : {}) }];
  const bands: uPlot.Band[] = [];
  let supersededPoints = 0;
  lines.forEach((l, i) => {
    const x = xsOf(l, o.x);
    const fix = o.log ? positive : (v: Array<number | null>) => v;
    const ys: Array<Array<number | null>> = [];
    const c = l.color ?? color(i);
    if (l.superseded) {
      ys.push(fix(o.smoothing > 0 ? ema(l.data.value, o.smoothing) : l.data.value));
      series.push({ label: l.label, stroke: c + '80', width: 1, dash: [5, 4], spanGaps: true });
      supersededPoints += l.data.step.length;
    } else if (o.smoothing > 0) {
      ys.push(fix(l.data.value));
      series.push({ label: `${l.label} (raw)`, stroke: c + '40', width: 1, spanGaps: true, show: true });
      ys.push(fix(ema(l.data.value, o.smoothing)));
      series.push({ label: l.label, stroke: c, width: 1.5, spanGaps: true });
    } else {
      ys.push(fix(l.data.value));
      series.push({ label: l.label, stroke: c, width: 1.5, spanGaps: true, ...(o.stepped ? { paths: uPlot.paths.stepped!({ align: -1 }) } : {}) });
    }
    if (l.band && !l.superseded && l.data.min && l.data.max) {
      const main = series.length - 1;
      ys.push(fix(l.data.max), fix(l.data.min));
      series.push({ label: `${l.label} max`, stroke: c + '30', width: 0.5, spanGaps: true }, { label: `${l.label} min`, stroke: c + '30', width: 0.5, spanGaps: true });
      bands.push({ series: [main + 1, main + 2], fill: c + '22' });
    }
    cols.push({ x, ys });
  });
  const data = align(cols);
  const t0 = lines[0]?.start ?? (lines[0]?.data.time.length ? Math.min(...lines[0].data.time) : 0);
  const marks = markers.map((m) => ({
    x: o.x === 'step' ? m.step : o.x === 'time' ? m.time : m.time - t0,
    el: h('div', { class: 'chart-marker', ...m.attrs }, h('span', { class: 'chart-marker-label', title: m.title }, m.label)),
  }));
  /** Each marker where its x falls in the plot (CSS pixels of the overlay); hidden outside the x range. */
  const placeMarkers = (self: uPlot) => {
    const w = self.over.clientWidth;
    for (const m of marks) {
      const left = self.valToPos(m.x, 'x');
      m.el.style.display = Number.isFinite(left) && left >= 0 && left <= w ? '' : 'none';
      m.el.style.left = `${left}px`;
    }
  };
  const width = Math.max(240, el.clientWidth || 480);
  const u = new uPlot({
    title, width, height: 220, series, bands,
    scales: { x: { time: o.x === 'time', range: xRange(o.x, data[0] as ArrayLike<number>) }, y: o.log ? { distr: 3 } : { range: yRange } },
    axes: [o.x === 'relative' ? { values: durationTicks } : {}, {
      // Labels that tell ticks apart, and an axis as wide as its widest label (uPlot's default, 50 px, cuts "17.848" to "7.848").
      values: (_u: uPlot, splits: number[]) => {
        const labels = o.log ? splits.map((v) => String(Number(v.toPrecision(6)))) : valueTicks(splits);
        el.dataset.yTicks = JSON.stringify(labels);
        return labels;
      },
      size: (_u: uPlot, values: string[] | null) => {
        const w = labelWidth(values ?? []);
        el.dataset.yLabelWidth = String(w);
        const size = Math.max(40, w + 18);
        el.dataset.yAxisSize = String(size);
        return size;
      },
    }],
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
    hooks: {
      // What the x axis spans (in steps or seconds), for people reading the DOM and for tests.
      setScale: [(self: uPlot, key: string) => {
        if (key !== 'x') return;
        el.dataset.xSpan = String((self.scales.x.max ?? 0) - (self.scales.x.min ?? 0));
        el.dataset.xMin = String(self.scales.x.min ?? 0);
        el.dataset.xMax = String(self.scales.x.max ?? 0);
        placeMarkers(self);
      }],
      setSize: [placeMarkers],
      ready: [(self: uPlot) => (self.over.append(...marks.map((m) => m.el)), placeMarkers(self))],
    },
  }, data, el);
  el.dataset.series = String(lines.filter((l) => !l.superseded).length);
  el.dataset.superseded = String(supersededPoints);
  el.dataset.points = String(data[0].length);
  el.dataset.x = o.x;
  return u;
}

/**
 * A chart slot in the page: draws when first visible, redraws on option
 * changes, and on refresh() reloads its data if it is visible (otherwise
 * when it next comes into view).
 */
export class LazyChart {
  readonly el: HTMLElement;
  private plot: uPlot | null = null;
  private lines: Line[] | null = null;
  private visible = false;
  private stale = true;
  private loading = false;
  private static observer: IntersectionObserver | null = null;
  private static slots = new WeakMap<Element, LazyChart>();

  constructor(
    readonly title: string, private load: (points: number) => Promise<Line[]>, private options: () => ChartOptions, attrs: Record<string, string> = {},
    /** Drawn over every rendering: the run's attempt boundaries. */
    private markers: () => Marker[] = () => [],
  ) {
    this.el = h('div', { class: 'chart', ...attrs }, h('div', { class: 'chart-title' }, title), h('p', { class: 'muted' }, 'waiting to scroll into view…'));
    if (!LazyChart.observer) {
      LazyChart.observer = new IntersectionObserver((entries) => {
        for (const e of entries) LazyChart.slots.get(e.target)?.setVisible(e.isIntersecting);
      }, { rootMargin: '200px' });
    }
    LazyChart.slots.set(this.el, this);
    LazyChart.observer.observe(this.el);
  }

  private setVisible(v: boolean): void {
    this.visible = v;
    if (v && this.stale) void this.fetch();
  }

  refresh(): void {
    this.stale = true;
    if (this.visible) void this.fetch();
  }

  redraw(): void {
    if (this.lines) this.render();
  }

  destroy(): void {
    LazyChart.observer?.unobserve(this.el);
    this.plot?.destroy();
  }

  private async fetch(): Promise<void> {
    if (this.loading) return;
    this.loading = true;
    this.stale = false;
    try {
      this.lines = await this.load(Math.max(200, Math.min(4000, Math.round((this.el.clientWidth || 600) * 1.5))));
      this.render();
    } catch (e) {
      clear(this.el);
      this.el.append(h('div', { class: 'chart-title' }, this.title), h('p', { class: 'error' }, (e as Error).message));
    } finally {
      this.loading = false;
    }
    if (this.stale && this.visible) void this.fetch();
  }

  private render(): void {
    this.plot?.destroy();
    if (!this.lines || this.lines.every((l) => l.data.step.length === 0)) {
      clear(this.el);
      this.el.append(h('div', { class: 'chart-title' }, this.title), h('p', { class: 'muted' }, 'no data'));
      this.plot = null;
      return;
    }
    this.plot = draw(this.el, this.title, this.lines, this.options(), this.markers());
    this.el.dataset.drawn = String(Date.now());
  }
}
