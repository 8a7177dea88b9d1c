// Rank health on the page: the group page's strip (each rank's progress, then
// the group's events) and the run page's events. An event's stacks, taken
// when its group stalled, open side by side under a "stacks" toggle; the rank
// outside the collective (or the one logd names as the cause) stands out.
// Under the strip's table, each rank's step rate over time (one line per
// rank, from the daemon's samples every 5 s: a stall drops to 0, a slow rank
// sits lower). Data from daemon/health (src/health.ts), merged per group on
// the server (daemon/ui/health.ts).
import type { JobStory } from '../src/story/story.js';
import type uPlot from 'uplot';
import { h, clear, stateBadge } from './dom.js';
import { draw, type Line } from './chart.js';
import { shownRows, slowest, RANK_ROWS, RATE_LINES, RATE_SLOWEST } from './many-ranks.js';
import { rankLabel, type HealthEvent, type RankStack, type StepRatePoint } from '../src/health.js';
import type { GroupHealth, RankHealth } from './api.js';

const eventKey = (e: HealthEvent) => `${e.at}|${e.kind}|${e.runIds.join(',')}`;
/** The ranks an event names, lowest first (the daemon lists them in the order it met them). */
const who = (ranks: Array<number | null>, runIds: string[]) => ranks.map((r, i) => [r, runIds[i]] as const)
  .sort((a, b) => (a[0] ?? 1e9) - (b[0] ?? 1e9) || a[1].localeCompare(b[1])).map(([r, id]) => rankLabel(r, id)).join(', ');

function agoS(s: number): string {
  if (s < 1) return 'now';
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

function seconds(s: number): string {
  return s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms` : `${s.toFixed(2)} s`;
}

function clock(at: number): HTMLElement {
  const d = new Date(at * 1000);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, d.toLocaleTimeString());
}

/**
 * A list of health events, newest first, kept across live updates: it is
 * redrawn only when the events change, so an open "stacks" stays open.
 */
export class HealthEvents {
  readonly el: HTMLElement;
  private shown = '';
  private readonly open = new Set<string>();

  constructor(private readonly compact: boolean) {
    this.el = h('div', { class: `health-events${compact ? ' compact' : ''}` });
  }

  update(events: HealthEvent[]): void {
    const sig = JSON.stringify(events.map((e) => [eventKey(e), e.evidence, e.cause?.why ?? '', e.stacks?.length ?? 0]));
    if (sig === this.shown) return;
    this.shown = sig;
    clear(this.el);
    if (events.length === 0) {
      this.el.append(h('p', { class: 'muted no-health-events' }, 'no health events'));
      return;
    }
    this.el.append(h('ol', { class: 'health-list' }, ...[...events].sort((a, b) => b.at - a.at).map((e) => this.event(e))));
  }

  private event(e: HealthEvent): HTMLElement {
    const key = eventKey(e);
    const li = h('li', { class: 'health-event', 'data-kind': e.kind, 'data-key': key },
      h('div', { class: 'event-line' }, clock(e.at), ' ', h('span', { class: `event-kind kind-${e.kind.replace(/[^a-z]/g, '')}` }, e.kind), ' ',
        h('span', { class: 'event-ranks' }, who(e.ranks, e.runIds))),
      e.cause ? h('div', { class: 'event-cause' }, 'likely cause: ', h('strong', {}, who(e.cause.ranks, e.cause.runIds)), `: ${e.cause.why}`) : null,
      h('div', { class: 'event-evidence muted' }, e.evidence));
    if (e.stacks?.length) {
      const panel = this.stacks(e.stacks, new Set(e.cause?.runIds ?? []));
      const btn = h('button', { class: 'stacks-toggle', type: 'button', 'aria-expanded': 'false' }, `stacks (${e.stacks.length})`);
      const show = (on: boolean) => {
        panel.hidden = !on;
        btn.setAttribute('aria-expanded', String(on));
        if (on) this.open.add(key);
        else this.open.delete(key);
      };
      btn.addEventListener('click', () => show(panel.hidden));
      show(this.open.has(key));
      li.append(btn, panel);
    }
    return li;
  }

  private stacks(stacks: RankStack[], causes: Set<string>): HTMLElement {
    // Outside the collective says something only when another rank is inside one.
    const someInside = stacks.some((s) => s.inCollective);
    const sorted = [...stacks].sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.runId.localeCompare(b.runId));
    return h('div', { class: 'stacks' }, ...sorted.map((s) => {
      const stands = causes.has(s.runId) || (someInside && !s.inCollective);
      return h('div', { class: `stack${stands ? ' stands-out' : ''}`, 'data-run-id': s.runId, 'data-in-collective': String(s.inCollective) },
        h('div', { class: 'stack-head' }, h('strong', {}, rankLabel(s.rank, s.runId)), ` pid ${s.pid} · `,
          s.inCollective ? 'in a collective' : someInside ? h('span', { class: 'outside' }, 'outside a collective') : 'outside a collective',
          s.cpuPercent === null ? '' : ` · ${Math.round(s.cpuPercent)} % CPU`),
        h('div', { class: 'stack-top mono' }, s.top),
        s.text.trim()
          ? h('pre', { class: 'stack-text' }, s.text)
          // A Node process idle in its event loop reports no JavaScript frame.
          : h('p', { class: 'stack-text muted' }, 'no frame was running (the process was waiting, not computing)'));
    }));
  }
}

/** The group page's strip: one row per rank, then the group's events. */
export class HealthStrip {
  readonly el: HTMLElement;
  private readonly verdict = h('span', { id: 'health-verdict' });
  private readonly story = h('div', { id: 'health-story', class: 'health-story', hidden: true });
  private readonly ranks = h('div', { class: 'health-ranks' });
  private readonly events = new HealthEvents(false);
  private readonly rate = h('div', { id: 'health-rate', class: 'health-rate', hidden: true });
  private readonly rateChart = h('div', { class: 'chart' });
  private readonly rateLatest = h('p', { class: 'health-rate-latest muted' });
  private plot: uPlot | null = null;
  private rateShown = '';
  /** Every rank's row, once "show all" was pressed (a group of more than RANK_ROWS ranks). */
  private allRanks = false;
  private last: GroupHealth | null = null;

  constructor() {
    this.rate.append(this.rateChart, this.rateLatest);
    this.el = h('section', { id: 'health', class: 'health-strip' }, h('h2', {}, 'Health ', this.verdict), this.story, this.ranks, this.rate, this.events.el);
  }

  update(g: GroupHealth): void {
    this.last = g;
    const story = g.story ?? null;
    // A group with a rank that did not finish is never "ok", judged or not.
    const ended = g.ranks.some((r) => r.runState === 'crashed' || r.runState === 'killed');
    const judged = g.ranks.some((r) => r.step >= 0) || g.events.length > 0 || ended;
    const straggler = g.ranks.some((r) => r.state === 'straggler');
    clear(this.verdict);
    if (judged) this.verdict.append(stateBadge(story ? story.verdict : g.stalled ? 'stalled' : straggler ? 'straggler' : ended ? 'crashed' : 'ok'));
    this.showStory(story);
    clear(this.ranks);
    // A group none of whose ranks gave steps has no progress to show: the quiet line below says it all.
    if (judged) this.ranks.append(this.table(g.ranks, g.now));
    this.drawRate(g.ranks);
    this.events.update(g.events);
  }

  /** The job's story: its one line, then each rank that did not finish in the order they ended. */
  private showStory(s: JobStory | null): void {
    clear(this.story);
    this.story.hidden = !s;
    if (!s) return;
    const fates = [...s.first, ...s.after];
    this.story.append(
      h('p', { class: 'story-line', 'data-verdict': s.verdict }, s.line),
      h('table', { class: 'runs story-table' },
        h('thead', {}, h('tr', {}, ...['', 'rank', 'ended', 'step', 'cause', 'how'].map((c) => h('th', {}, c)))),
        h('tbody', {}, ...fates.map((f) => h('tr', {
          class: 'story-rank', 'data-health-run-id': f.runId, 'data-cause': f.cause,
          'data-role': s.first.includes(f) ? 'first' : f.consequence ? 'consequence' : 'independent',
        },
        h('td', {}, s.first.includes(f) ? (s.unordered ? 'first?' : 'first') : f.consequence ? 'after' : 'also'),
        h('td', {}, rankLabel(f.rank, f.runId)),
        h('td', {}, Number.isFinite(f.at) && f.at > 0 ? new Date(f.at * 1000).toISOString().slice(11, 23) : '–'),
        h('td', { class: 'num' }, f.lastStep < 0 ? '–' : f.lastStep),
        h('td', {}, f.consequence && f.cause !== 'terminated' ? 'consequence' : f.cause),
        h('td', { title: f.evidence.join('\n') }, f.how))))));
  }

  /** Each rank's step rate over time; drawn again only when a rank has a new sample. */
  private drawRate(ranks: RankHealth[]): void {
    // A server older than the series sends no `rate`.
    const withRate = ranks.filter((r): r is RankHealth & { rate: StepRatePoint[] } => (r.rate ?? []).length > 0);
    const sig = JSON.stringify(withRate.map((r) => [r.runId, r.rate.length, r.rate[r.rate.length - 1].at]));
    if (sig === this.rateShown) return;
    this.rateShown = sig;
    this.plot?.destroy();
    this.plot = null;
    this.rate.hidden = withRate.length === 0;
    if (withRate.length === 0) return;
    // Hundreds of ranks: the slowest few, not a line each.
    const many = withRate.length > RATE_LINES;
    const drawn = many ? slowest(withRate, RATE_SLOWEST, (r) => r.rate[r.rate.length - 1].stepsPerS) : withRate;
    this.rate.dataset.lines = String(drawn.length);
    const lines: Line[] = drawn.map((r) => ({
      label: rankLabel(r.rank, r.runId),
      // Drawn as steps: each rate holds over its interval, the first one from the sample before it.
      data: { step: [r.rate[0].step, ...r.rate.map((p) => p.step)], time: [r.rate[0].from, ...r.rate.map((p) => p.at)],
        value: [r.rate[0].stepsPerS, ...r.rate.map((p) => p.stepsPerS)], points: r.rate.length + 1 },
    }));
    this.plot = draw(this.rateChart, many ? `steps/s over time: the ${drawn.length} slowest of ${withRate.length} ranks` : 'steps/s per rank over time', lines, { x: 'time', smoothing: 0, log: false, stepped: true });
    clear(this.rateLatest);
    this.rateLatest.append(many ? 'latest sample of the slowest: ' : 'latest sample: ', ...drawn.flatMap((r, i) => {
      const last = r.rate[r.rate.length - 1].stepsPerS;
      return [i ? ' · ' : '', h('span', { class: 'rate-latest', 'data-health-run-id': r.runId, 'data-steps-per-s': String(last) }, `${rankLabel(r.rank, r.runId)} ${last.toFixed(2)} steps/s`)];
    }));
  }

  private table(all: RankHealth[], now: number): HTMLElement {
    const num = (v: string | number) => h('td', { class: 'num' }, v);
    // Hundreds of ranks: a page of rows, the ranks that are not ok first.
    const ranks = shownRows(all, RANK_ROWS, this.allRanks, (r) => r.state !== 'ok');
    const more = all.length - ranks.length;
    const showAll = h('button', { id: 'health-show-all' }, `show all ${all.length} ranks`);
    showAll.addEventListener('click', () => {
      this.allRanks = true;
      if (this.last) this.update(this.last);
    });
    const table = h('table', { class: 'runs health-table' },
      h('thead', {}, h('tr', {}, ...['rank', 'state', 'step', 'steps/s', 'last step', 'lag', 'CPU/step'].map((c, i) => h('th', i >= 2 ? { class: 'num' } : {}, c)))),
      h('tbody', {}, ...ranks.map((r) => h('tr', { class: 'rank-health', 'data-health-run-id': r.runId, 'data-state': r.state },
        h('td', {}, rankLabel(r.rank, r.runId)),
        h('td', {}, stateBadge(r.state)),
        num(r.step < 0 ? '–' : r.step),
        num(r.stepsPerS === null ? '–' : r.stepsPerS.toFixed(2)),
        num(r.stepAt > 0 ? agoS(Math.max(0, now - r.stepAt)) : '–'),
        num(r.step < 0 ? '–' : r.lag > 0 ? `${r.lag} behind` : r.lag < 0 ? `${-r.lag} ahead` : '0'),
        num(r.cpuPerStepS === null ? '–' : seconds(r.cpuPerStepS))))));
    return more > 0 ? h('div', {}, table, h('p', { class: 'muted', id: 'health-more' }, `${ranks.length} of ${all.length} ranks shown (those not ok first) `, showAll)) : table;
  }
}
