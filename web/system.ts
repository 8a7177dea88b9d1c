// The System charts of a run: every GPU of its node (utilisation, memory,
// temperature, power; one series per GPU), then CPU, memory, disk, network
// and the run's own processes. Used by the run page's System tab and, once
// per node, by the group page.
import { h, fmt } from './dom.js';
import { api, type Run, type ChartSeries } from './api.js';
import { LazyChart, type Line } from './chart.js';

interface Panel {
  title: string;
  /** Picks the panel's metrics and names each series. */
  pick: (key: string) => string | null;
}

const gpu = (metric: string) => (k: string) => {
  const m = /^gpu\.(\d+)\.(.+)$/.exec(k);
  return m && m[2] === metric ? `GPU ${m[1]}` : null;
};
const only = (...names: string[]) => (k: string) => (names.includes(k) ? k : null);

export const PANELS: Panel[] = [
  { title: 'GPU utilisation (%)', pick: gpu('gpu') },
  { title: 'GPU memory allocated (%)', pick: gpu('memoryAllocated') },
  { title: 'GPU temperature (°C)', pick: gpu('temp') },
  { title: 'GPU power (W)', pick: gpu('powerWatts') },
  { title: 'CPU, whole node (%)', pick: only('cpu') },
  { title: 'Memory (%)', pick: only('memory_percent') },
  { title: 'Disk usage (%)', pick: (k) => (/^disk\..+\.usagePercent$/.test(k) ? k.slice(5, -13) : null) },
  { title: 'Disk I/O since start (MiB)', pick: only('disk.in', 'disk.out') },
  { title: 'Network since start (bytes)', pick: only('network.recv', 'network.sent') },
  { title: "The run's processes: CPU (% of a core)", pick: only('proc.cpu.percent') },
  { title: "The run's processes: memory (RSS MiB)", pick: only('proc.memory.rssMB') },
  { title: "The run's processes: GPU memory (bytes)", pick: only('gpu.process.memoryAllocatedBytes') },
];

const byIndex = (a: Line, b: Line) => a.label.localeCompare(b.label, undefined, { numeric: true });

/** Renders the panels for each run (one per node); returns a stopper. */
export function systemCharts(container: HTMLElement, runs: Run[]): () => void {
  const charts: LazyChart[] = [];
  const timers: Array<ReturnType<typeof setInterval>> = [];
  for (const r of runs) {
    let pending: Promise<{ series: Record<string, ChartSeries> }> | null = null;
    const fetchOnce = () => (pending ??= api.system(r.id, 400).finally(() => setTimeout(() => (pending = null), 500)));
    const facts = h('div', { class: 'gpus' });
    const grid = h('div', { class: 'grid' });
    const host = (r.metadata as { host?: string }).host ?? '';
    container.append(h('section', { class: 'system', 'data-run-id': r.id }, h('h2', {}, `System of ${host || 'the node'}`, h('span', { class: 'muted' }, ` (run ${r.name || r.id})`)), facts, grid));
    void fetchOnce().then((s) => {
      const gpus = (s as unknown as { gpus: Array<{ index: number; name: string; uuid: string; memoryTotalBytes: number; driverVersion?: string }> }).gpus;
      if (gpus.length === 0) facts.append(h('p', { class: 'muted' }, 'no GPU reported on this node'));
      else facts.append(h('table', { class: 'kv gpu-table' }, h('thead', {}, h('tr', {}, h('th', {}, 'GPU'), h('th', {}, 'name'), h('th', {}, 'memory'), h('th', {}, 'uuid'))),
        h('tbody', {}, ...gpus.map((g) => h('tr', {}, h('td', {}, g.index), h('td', {}, g.name), h('td', {}, `${fmt(g.memoryTotalBytes / 2 ** 30)} GiB`), h('td', { class: 'mono' }, g.uuid))))));
    }, (e: Error) => facts.append(h('p', { class: 'error' }, e.message)));
    for (const p of PANELS) {
      const c = new LazyChart(p.title, async () => {
        const s = await fetchOnce();
        const lines: Line[] = [];
        for (const [k, data] of Object.entries(s.series)) {
          const label = p.pick(k);
          if (label !== null) lines.push({ label, data, band: false });
        }
        return lines.sort(byIndex);
      }, () => ({ x: 'time', smoothing: 0, log: false }), { 'data-panel': p.title });
      charts.push(c);
      grid.append(c.el);
    }
    if (r.state === 'running') timers.push(setInterval(() => charts.forEach((c) => c.refresh()), 5000));
  }
  return () => {
    timers.forEach(clearInterval);
    charts.forEach((c) => c.destroy());
  };
}
