// One chart: uPlot, drawn when it scrolls into view (IntersectionObserver),
// so a page of thousands of metrics only draws what is seen. x is step or
// time; smoothing is an EMA debiased as TensorBoard does it; a log scale
// drops values <= 0; a downsampled series (or a group's spread) draws its
// min–max band so spikes inside a bucket still show.
import uPlot from 'uplot';
import { h, clear } from './dom.js';
import type { ChartSeries } from './api.js';
import { ema } from './smoothing.js';

export interface Line {
  label: string;
  data: ChartSeries;
  /** Draw data.min/data.max as a band around the line (when present). */
  band?: boolean;
}

export interface ChartOptions {
  x: 'step' | 'time';
  /** 0 (off) to 0.999. */
  smoothing: number;
  log: boolean;
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

export function draw(el: HTMLElement, title: string, lines: Line[], o: ChartOptions): uPlot {
  clear(el);
  const cols: Array<{ x: number[]; ys: Array<Array<number | null>> }> = [];
  const series: uPlot.Series[] = [{ label: o.x === 'time' ? 'time' : 'step' }];
  const bands: uPlot.Band[] = [];
  lines.forEach((l, i) => {
    const x = o.x === 'time' ? l.data.time : l.data.step;
    const fix = o.log ? positive : (v: Array<number | null>) => v;
    const ys: Array<Array<number | null>> = [];
    const c = color(i);
    if (o.smoothing > 0) {
      ys.push(fix(l.data.value));
      series.push({ label: `${l.label} (raw)`, stroke: c + '40', width: 1, spanGaps: true, show: true });
      ys.push(fix(ema(l.data.value, o.smoothing)));
      series.push({ label: l.label, stroke: c, width: 1.5, spanGaps: true });
    } else {
      ys.push(fix(l.data.value));
      series.push({ label: l.label, stroke: c, width: 1.5, spanGaps: true });
    }
    if (l.band && l.data.min && l.data.max) {
      const main = series.length - 1;
      ys.push(fix(l.data.max), fix(l.data.min));
      series.push({ label: `${l.label} max`, stroke: c + '30', width: 0.5, spanGaps: true }, { label: `${l.label} min`, stroke: c + '30', width: 0.5, spanGaps: true });
      bands.push({ series: [main + 1, main + 2], fill: c + '22' });
    }
    cols.push({ x, ys });
  });
  const data = align(cols);
  const width = Math.max(240, el.clientWidth || 480);
  const u = new uPlot({
    title, width, height: 220, series, bands,
    scales: { x: { time: o.x === 'time' }, y: o.log ? { distr: 3 } : {} },
    legend: { live: true },
    cursor: { drag: { x: true, y: false } },
  }, data, el);
  el.dataset.series = String(lines.length);
  el.dataset.points = String(data[0].length);
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

  constructor(readonly title: string, private load: (points: number) => Promise<Line[]>, private options: () => ChartOptions, attrs: Record<string, string> = {}) {
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
    this.plot = draw(this.el, this.title, this.lines, this.options());
    this.el.dataset.drawn = String(Date.now());
  }
}
