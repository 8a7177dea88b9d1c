// One distribution chart on a canvas: a histogram key's quantiles over steps
// as nested shaded bands (min–max, then 7–93 %, 16–84 %, 31–69 %) and the
// median as a line, TensorBoard's "distributions" view. Drawn by hand rather
// than through uPlot: four filled bands of 1000 steps are four paths. The
// time a draw took is kept in data-draw-ms (quantiles and pixels).
import { h, fmt } from './dom.js';
import { distribution, type Distribution, type HistogramAt } from './quantiles.js';

const HEIGHT = 220;
const PAD = { left: 56, right: 12, top: 8, bottom: 24 };
const BAND_FILL = ['rgba(31,119,180,0.12)', 'rgba(31,119,180,0.22)', 'rgba(31,119,180,0.32)', 'rgba(31,119,180,0.45)'];
const LINE = '#1f77b4';

/** About n round numbers spanning [lo, hi]. */
function ticks(lo: number, hi: number, n: number): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

export class DistributionChart {
  readonly el: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly readout: HTMLElement;
  private dist: Distribution | null = null;
  private readonly onResize = () => {
    if (this.resizeTimer) clearTimeout(this.resizeTimer);
    this.resizeTimer = setTimeout(() => this.draw(), 150);
  };
  private resizeTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(readonly title: string, attrs: Record<string, string> = {}) {
    this.canvas = h('canvas', { class: 'dist-canvas', role: 'img', 'aria-label': `distribution of ${title} over steps` });
    this.readout = h('div', { class: 'dist-readout muted mono' }, '\u00a0');
    // What the bands are, and what the axes carry (x: the step; y: the values of the histogram).
    const legend = h('div', { class: 'dist-legend muted' },
      h('span', { class: 'dist-axis-label' }, 'x: step · y: value · '),
      ...[['min–max', 0], ['7–93 %', 1], ['16–84 %', 2], ['31–69 %', 3]].map(([label, i]) =>
        h('span', { class: 'dist-key', 'data-band': String(label) }, h('span', { class: 'swatch', style: `background:${BAND_FILL[i as number]}` }), ` ${label} `)),
      h('span', { class: 'dist-key', 'data-band': 'median' }, h('span', { class: 'swatch line', style: `background:${LINE}` }), ' median'));
    this.el = h('div', { class: 'chart dist-chart', ...attrs }, h('div', { class: 'chart-title' }, title), this.canvas, legend, this.readout);
    this.canvas.addEventListener('mousemove', (e) => this.showAt(e.offsetX));
    this.canvas.addEventListener('mouseleave', () => (this.readout.textContent = '\u00a0'));
    window.addEventListener('resize', this.onResize);
  }

  /** New histograms (every one of the key's, in any order): quantiles computed and drawn. */
  set(hists: readonly HistogramAt[]): void {
    const t0 = performance.now();
    this.dist = distribution(hists);
    this.draw(t0);
  }

  destroy(): void {
    window.removeEventListener('resize', this.onResize);
  }

  draw(t0 = performance.now()): void {
    const d = this.dist;
    if (!d) return;
    const cssWidth = Math.max(240, this.el.clientWidth - 10 || 480);
    const dpr = window.devicePixelRatio || 1;
    this.canvas.style.width = `${cssWidth}px`;
    this.canvas.style.height = `${HEIGHT}px`;
    this.canvas.width = Math.round(cssWidth * dpr);
    this.canvas.height = Math.round(HEIGHT * dpr);
    const g = this.canvas.getContext('2d');
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, cssWidth, HEIGHT);
    const n = d.steps.length, k = d.qs.length;
    const x0 = n ? d.steps[0] : 0, x1 = n ? d.steps[n - 1] : 1;
    const [xlo, xhi] = x1 > x0 ? [x0, x1] : [x0 - 1, x0 + 1];
    const finite = Number.isFinite(d.min) && Number.isFinite(d.max);
    const pad = finite ? (d.max - d.min) * 0.04 || Math.abs(d.max) * 0.1 || 1 : 1;
    const [ylo, yhi] = finite ? [d.min - pad, d.max + pad] : [0, 1];
    const w = cssWidth - PAD.left - PAD.right, hgt = HEIGHT - PAD.top - PAD.bottom;
    const X = (s: number) => PAD.left + ((s - xlo) / (xhi - xlo)) * w;
    const Y = (v: number) => PAD.top + (1 - (v - ylo) / (yhi - ylo)) * hgt;
    this.axes(g, xlo, xhi, ylo, yhi, X, Y, cssWidth);
    // Bands from the outside in: quantile j and its mirror k-1-j.
    for (let j = 0; j < Math.floor(k / 2); j++) {
      g.fillStyle = BAND_FILL[Math.min(j, BAND_FILL.length - 1)];
      this.band(g, d, j, k - 1 - j, X, Y);
    }
    const mid = Math.floor(k / 2);
    g.strokeStyle = LINE;
    g.lineWidth = 1.5;
    g.beginPath();
    let pen = false;
    for (let s = 0; s < n; s++) {
      const v = d.values[s * k + mid];
      if (Number.isNaN(v)) {
        pen = false;
        continue;
      }
      if (pen) g.lineTo(X(d.steps[s]), Y(v));
      else g.moveTo(X(d.steps[s]), Y(v));
      pen = true;
    }
    if (n === 1) g.arc(X(d.steps[0]), Y(d.values[mid]), 2, 0, Math.PI * 2);
    g.stroke();
    this.el.dataset.steps = String(n);
    this.el.dataset.drawMs = (performance.now() - t0).toFixed(1);
    this.el.dataset.drawn = String(Date.now());
  }

  /** One band: the upper quantile forwards, the lower one back; steps with an empty histogram break it. */
  private band(g: CanvasRenderingContext2D, d: Distribution, lo: number, hi: number, X: (s: number) => number, Y: (v: number) => number): void {
    const n = d.steps.length, k = d.qs.length;
    let start = 0;
    while (start < n) {
      while (start < n && Number.isNaN(d.values[start * k + lo])) start++;
      let end = start;
      while (end < n && !Number.isNaN(d.values[end * k + lo])) end++;
      if (end > start) {
        g.beginPath();
        g.moveTo(X(d.steps[start]), Y(d.values[start * k + hi]));
        for (let s = start + 1; s < end; s++) g.lineTo(X(d.steps[s]), Y(d.values[s * k + hi]));
        for (let s = end - 1; s >= start; s--) g.lineTo(X(d.steps[s]), Y(d.values[s * k + lo]));
        g.closePath();
        g.fill();
        if (end - start === 1) {
          g.fillRect(X(d.steps[start]) - 2, Y(d.values[start * k + hi]), 4, Math.max(1, Y(d.values[start * k + lo]) - Y(d.values[start * k + hi])));
        }
      }
      start = end;
    }
  }

  private axes(g: CanvasRenderingContext2D, xlo: number, xhi: number, ylo: number, yhi: number, X: (s: number) => number, Y: (v: number) => number, width: number): void {
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#555';
    g.strokeStyle = '#eee';
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (const v of ticks(ylo, yhi, 6)) {
      const y = Math.round(Y(v)) + 0.5;
      g.beginPath();
      g.moveTo(PAD.left, y);
      g.lineTo(width - PAD.right, y);
      g.stroke();
      g.fillText(fmt(v), PAD.left - 4, y);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    for (const s of ticks(xlo, xhi, 6).filter(Number.isInteger)) g.fillText(String(s), X(s), HEIGHT - PAD.bottom + 6);
  }

  /** The quantiles at the step under the pointer, as text. */
  private showAt(px: number): void {
    const d = this.dist;
    if (!d || d.steps.length === 0) return;
    const n = d.steps.length, k = d.qs.length;
    const w = Math.max(1, (parseFloat(this.canvas.style.width) || 480) - PAD.left - PAD.right);
    const x0 = d.steps[0], x1 = d.steps[n - 1];
    const want = x1 > x0 ? x0 + ((px - PAD.left) / w) * (x1 - x0) : x0;
    let lo = 0, hi = n - 1;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (d.steps[m] < want) lo = m + 1;
      else hi = m;
    }
    const s = lo > 0 && Math.abs(d.steps[lo - 1] - want) < Math.abs(d.steps[lo] - want) ? lo - 1 : lo;
    const v = (j: number) => fmt(d.values[s * k + j]);
    this.readout.textContent = `step ${d.steps[s]}: median ${v(Math.floor(k / 2))} · 16–84 % ${v(2)} – ${v(k - 3)} · min ${v(0)} · max ${v(k - 1)}`;
  }
}
