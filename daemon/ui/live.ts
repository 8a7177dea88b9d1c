// The live feed (Server-Sent Events). One feed per open page; it polls the
// query source, which works the same for the local and the shared store:
//   runs=<id>:<rows> (repeatable): new rows of these runs, from row <rows> on,
//     and their state changes, polled every LIVE_POLL_MS;
//   list=1: state changes of running runs and a `runs` event when the number
//     of runs changes (the runs list then reloads its page), every second.
// Events: `rows` {run, first, rows: [{s, t, v: {key: value}}]}, `state`
// {run, state, stateReason, historyRows}, `runs` {total}, `reload` {run}
// (too many new rows at once: re-read the history instead).
import type http from 'node:http';
import type { Api } from './api.js';
import { runJson, supersededOf } from './api.js';
import type { RunSeries } from './series.js';

const LIVE_POLL_MS = 300;
const LIST_POLL_MS = 1000;
const MAX_ROWS_PER_EVENT = 5000;
const HEARTBEAT_MS = 15_000;
/**
 * A client that does not read (a background tab, a stalled proxy) must not make `logd ui` buffer for it without
 * bound. Past SLOW_BYTES not yet taken, its feed makes no new events (its cursors stay where they are, so it catches
 * up later, or gets `reload` when too far behind); past DROP_BYTES (one large event on top) it is dropped: the page's
 * EventSource reconnects and carries on from its cursors.
 */
const SLOW_BYTES = 1024 * 1024;
const DROP_BYTES = 16 * 1024 * 1024;

interface Cursor {
  rows: number;
  state: string;
  /** The run's supersededRows the browser's rows were read under (undefined: not seen yet). */
  superseded?: number;
}

export function serveLive(api: Api, q: URLSearchParams, req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write('retry: 2000\n\n');
  let closed = false;
  const timers: NodeJS.Timeout[] = [];
  const stop = () => {
    closed = true;
    timers.forEach(clearTimeout);
  };
  const drop = () => {
    if (closed) return;
    stop();
    res.destroy();
  };
  const send = (event: string, data: unknown) => sendRaw(sseEvent(event, data));
  const sendRaw = (text: string) => {
    if (closed) return;
    res.write(text);
    if (res.writableLength > DROP_BYTES) drop();
  };
  /** The client is behind: make no new events for it this turn. */
  const behind = () => res.writableLength > SLOW_BYTES;
  const cursors = new Map<string, Cursor>();
  for (const spec of q.getAll('runs').slice(0, 2048)) {
    const m = /^([A-Za-z0-9_-]{1,64})(?::(\d+))?$/.exec(spec);
    if (m) cursors.set(m[1], { rows: Number(m[2] ?? 0), state: '' });
  }
  req.on('close', stop);
  const loop = (ms: number, step: () => Promise<void>) => {
    const tick = async () => {
      if (closed) return;
      try {
        if (!behind()) await step();
      } catch (e) {
        if (!closed) send('problem', { message: (e as Error).message });
      }
      if (!closed) timers.push(setTimeout(tick, ms));
    };
    void tick();
  };
  timers.push(setInterval(() => !behind() && res.write(': keep-alive\n\n'), HEARTBEAT_MS));

  if (cursors.size) loop(LIVE_POLL_MS, async () => {
    for (const [id, c] of cursors) {
      if (closed || behind()) return;
      const r = await api.source.getRun(id).catch(() => null);
      if (!r) continue;
      const rows = Number(r.historyRows);
      const superseded = supersededOf(r);
      c.superseded ??= superseded;
      if (superseded !== c.superseded) {
        // A rewind (resume_from) superseded rows the page shows: it reads the run again.
        c.superseded = superseded;
        c.rows = (await api.cache.get(id, rows, superseded)).rows;
        send('reload', { run: id, rows: c.rows });
        continue;
      }
      if (rows > c.rows) {
        const s = await api.cache.get(id, rows, superseded);
        if (s.rows - c.rows > MAX_ROWS_PER_EVENT) send('reload', { run: id, rows: s.rows });
        else if (s.rows > c.rows) sendRaw(rowsEvent(id, s, c.rows));
        c.rows = Math.max(c.rows, s.rows);
      }
      if (r.state !== c.state) {
        if (c.state !== '' || r.state !== 'running') send('state', { run: id, state: r.state, stateReason: r.stateReason, historyRows: rows });
        c.state = r.state;
      }
    }
  });

  if (q.get('list') === '1') {
    const running = new Map<string, { state: string; rows: number }>();
    let total = -1;
    loop(LIST_POLL_MS, async () => {
      const all = await api.source.listRuns({ limit: 1 });
      if (total !== -1 && all.total !== total) send('runs', { total: all.total });
      total = all.total;
      const now = await api.source.listRuns({ state: 'running', limit: 1000 });
      const seen = new Set<string>();
      for (const r of now.runs) {
        seen.add(r.id);
        const before = running.get(r.id);
        const rows = Number(r.historyRows);
        if (!before || before.rows !== rows) send('state', { run: r.id, state: r.state, stateReason: r.stateReason, historyRows: rows });
        running.set(r.id, { state: r.state, rows });
      }
      for (const id of [...running.keys()]) {
        if (seen.has(id)) continue;
        running.delete(id);
        const r = await api.source.getRun(id).catch(() => null);
        if (r) send('state', { run: id, state: r.state, stateReason: r.stateReason, historyRows: Number(r.historyRows), info: runJson(r) });
      }
    });
  }
}

const sseEvent = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * The `rows` event of a run's rows from `first` on, as sent: pages that follow one run are mostly at the same
 * cursor, so the event is made once for all of them (50 pages on a fast run made 50 copies of it every turn).
 */
const rowsEvents = new Map<string, string>();
function rowsEvent(id: string, s: RunSeries, first: number): string {
  const tag = `${id}\0${first}\0${s.rows}`;
  let text = rowsEvents.get(tag);
  if (text === undefined) {
    const out: Array<{ s: number; t: number; v: Record<string, number | null> }> = [];
    for (let i = first; i < s.rows; i++) {
      const v: Record<string, number | null> = Object.create(null); // a metric named __proto__ is a key like any other
      for (let p = s.start.a[i]; p < s.start.a[i + 1]; p++) {
        const x = s.values.a[p];
        v[s.keys[s.keyIds.a[p]]] = Number.isFinite(x) ? x : null;
      }
      out.push({ s: s.steps.a[i], t: s.times.a[i], v });
    }
    text = sseEvent('rows', { run: id, first, rows: out });
    rowsEvents.set(tag, text);
    if (rowsEvents.size > 8) rowsEvents.delete(rowsEvents.keys().next().value!);
  }
  return text;
}
