// The System charts of a run: every GPU of its node (utilisation, memory,
// temperature, power; one series per GPU), then CPU, memory, disk, network
// and the run's own processes. Used by the run page's System tab and, once
// per node, by the group page. A panel shows only when the node reported its
// metrics: a node without GPUs gets no GPU panels.
import { h, clear, fmt } from './dom.js';
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

/** The node a run ran on: LOGD_NODE (metadata.node, set by the shared store), else its host. */
export function nodeOf(r: Run): string {
  const m = r.metadata as { node?: string; host?: string };
  return String(m.node || m.host || '');
}

interface SystemAnswer { host: string; gpus: Array<{ index: number; name: string; uuid: string; memoryTotalBytes: number }>; keys: string[]; series: Record<string, ChartSeries> }

/** Renders the panels for each run (one per node); returns a stopper. */
export function systemCharts(container: HTMLElement, runs: Run[]): () => void {
  const charts: LazyChart[] = [];
  const timers: Array<ReturnType<typeof setInterval>> = [];
  let stopped = false;
  for (const r of runs) {
    let pending: Promise<SystemAnswer> | null = null;
    const fetchOnce = () => (pending ??= (api.system(r.id, 400) as Promise<SystemAnswer>).finally(() => setTimeout(() => (pending = null), 500)));
    const facts = h('div', { class: 'gpus' });
    const grid = h('div', { class: 'grid' });
    const node = nodeOf(r);
    const host = String((r.metadata as { host?: string }).host ?? '');
    // A section that folds: a group of many nodes shows every node's heading at a glance.
    container.append(h('details', { class: 'system', open: true, 'data-run-id': r.id, 'data-node': node },
      h('summary', {}, h('h2', {}, `System of ${node || 'the node'}`, h('span', { class: 'muted' }, `${host && host !== node ? ` (host ${host})` : ''} (run ${r.name || r.id})`))), facts, grid));
    grid.append(h('p', { class: 'muted' }, 'loading…'));
    const shown = new Set<string>();
    const mine: LazyChart[] = [];
    /** Adds the panels whose metrics the node reported (more may appear while the run lives). */
    const addPanels = (s: SystemAnswer) => {
      if (stopped) return;
      if (shown.size === 0) clear(grid);
      for (const p of PANELS) {
        if (shown.has(p.title) || !s.keys.some((k) => p.pick(k) !== null)) continue;
        shown.add(p.title);
        const c = new LazyChart(p.title, async () => {
          const now = await fetchOnce();
          const lines: Line[] = [];
          for (const [k, data] of Object.entries(now.series)) {
            const label = p.pick(k);
            if (label !== null) lines.push({ label, data, band: false });
          }
          return lines.sort(byIndex);
        }, () => ({ x: 'time', smoothing: 0, log: false }), { 'data-panel': p.title });
        charts.push(c);
        mine.push(c);
        grid.append(c.el);
      }
      if (shown.size === 0 && !grid.querySelector('.no-samples')) grid.append(h('p', { class: 'muted no-samples' }, 'no system samples for this run (sampling off, or the run was too short)'));
      if (shown.size > 0) grid.querySelector('.no-samples')?.remove();
    };
    void fetchOnce().then((s) => {
      if (s.gpus.length === 0) facts.append(h('p', { class: 'muted no-gpu' }, 'no GPU reported on this node'));
      else facts.append(h('table', { class: 'kv gpu-table' }, h('thead', {}, h('tr', {}, h('th', {}, 'GPU'), h('th', {}, 'name'), h('th', {}, 'memory'), h('th', {}, 'uuid'))),
        h('tbody', {}, ...s.gpus.map((g) => h('tr', {}, h('td', {}, g.index), h('td', {}, g.name), h('td', {}, `${fmt(g.memoryTotalBytes / 2 ** 30)} GiB`), h('td', { class: 'mono' }, g.uuid))))));
      addPanels(s);
      // A run over before the sampler's next tick: the node was sampled as it began and as it ended, no more.
      const lasted = r.finishedAt ? (Date.parse(r.finishedAt) - Date.parse(r.createdAt)) / 1000 : null;
      const most = Math.max(0, ...Object.values(s.series).map((x) => x.time.length));
      if (lasted !== null && most > 0 && most <= 3 && lasted < 10) {
        facts.append(h('p', { class: 'muted too-short' }, `This run lasted ${lasted < 1 ? lasted.toFixed(2) : lasted.toFixed(1)} s, less than the node's sampling interval: it was sampled as it began and as it ended, nothing between (LOGD_SAMPLE_INTERVAL_MS, or init's sampleIntervalMs, samples more often).`));
      }
    }, (e: Error) => (clear(grid), facts.append(h('p', { class: 'error' }, e.message))));
    if (r.state === 'running') {
      timers.push(setInterval(() => {
        void fetchOnce().then(addPanels, () => {});
        mine.forEach((c) => c.refresh());
      }, 5000));
    }
  }
  return () => {
    stopped = true;
    timers.forEach(clearInterval);
    charts.forEach((c) => c.destroy());
  };
}
