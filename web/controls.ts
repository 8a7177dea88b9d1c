// The chart controls shared by the run, group and compare pages: x axis
// (step, wall time, time since the run's start), smoothing, log scale. They
// live in the URL (?x=relative&smooth=0.6&log=1), so a shared link shows the
// same charts.
import { h } from './dom.js';
import { X_LABELS, type ChartOptions, type XAxis } from './chart.js';

const AXES = Object.keys(X_LABELS) as XAxis[];
const axisOf = (v: string | null): XAxis => (AXES.includes(v as XAxis) ? (v as XAxis) : 'step');

export function chartControls(onChange: () => void): { el: HTMLElement; options: () => ChartOptions } {
  const p = new URLSearchParams(location.search);
  const x = h('select', { id: 'x-axis', title: 'x axis' }, ...AXES.map((a) => h('option', { value: a, selected: axisOf(p.get('x')) === a }, `x: ${X_LABELS[a]}`)));
  const smooth = h('input', { type: 'range', id: 'smoothing', min: '0', max: '0.99', step: '0.01', value: String(Number(p.get('smooth') ?? 0) || 0) });
  const smoothOut = h('span', { class: 'mono' }, smooth.value);
  const log = h('input', { type: 'checkbox', id: 'log-scale', checked: p.get('log') === '1' });
  const options = (): ChartOptions => ({ x: axisOf(x.value), smoothing: Number(smooth.value), log: log.checked });
  const changed = () => {
    smoothOut.textContent = smooth.value;
    const u = new URLSearchParams(location.search);
    const o = options();
    if (o.x !== 'step') u.set('x', o.x); else u.delete('x');
    if (o.smoothing > 0) u.set('smooth', String(o.smoothing)); else u.delete('smooth');
    if (o.log) u.set('log', '1'); else u.delete('log');
    history.replaceState(null, '', location.pathname + (u.toString() ? `?${u}` : ''));
    onChange();
  };
  x.addEventListener('change', changed);
  smooth.addEventListener('input', changed);
  log.addEventListener('change', changed);
  return { el: h('div', { class: 'controls' }, x, h('label', {}, 'smoothing ', smooth, ' ', smoothOut), h('label', {}, log, ' log scale')), options };
}

/** Groups metric names by their prefix before the first `/` ('' for none). */
export function byPrefix(keys: string[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const k of keys) {
    const i = k.indexOf('/');
    const p = i > 0 ? k.slice(0, i) : '';
    (m.get(p) ?? m.set(p, []).get(p)!).push(k);
  }
  return new Map([...m].sort((a, b) => (a[0] === '' ? -1 : b[0] === '' ? 1 : a[0] < b[0] ? -1 : 1)));
}
