// A run that survived restarts (issue 19): its attempts as a table (each
// resume, init(resume=...) or init(resume_from=...), is one), the run it was
// forked from, the attempt boundaries its charts mark, and the count of rows
// a rewind superseded (the charts' "show superseded rows" draws them). All of
// it is read from the run's metadata (attempts, forkedFrom, supersededRows),
// as `logd show` reads it.
import { h, link } from './dom.js';
import type { Attempt, Run } from './api.js';
import type { Marker } from './chart.js';
import { attemptsIn } from '../src/attempts.js';

/** At most this many attempts open the table at first; more start folded. */
const OPEN_UP_TO = 5;

export function attemptsOf(r: Run): Attempt[] {
  return attemptsIn<Attempt>(r.metadata);
}

/** Rows of earlier attempts above the step a later attempt resumed from (metadata.supersededRows). */
export function supersededRowsOf(r: Run): number {
  const n = (r.metadata as { supersededRows?: unknown }).supersededRows;
  return typeof n === 'number' && n > 0 ? n : 0;
}

/** The step an attempt continues after: the step it resumed from (a rewind), else the last step stored before it. */
export function boundaryStep(a: Attempt): number {
  return typeof a.resumedFromStep === 'number' ? a.resumedFromStep : a.fromStep - 1;
}

const when = (sec: number | undefined) => (typeof sec === 'number' && sec > 0 ? new Date(sec * 1000).toISOString().slice(0, 19).replace('T', ' ') : '');

/** The Attempts section, or null for a run of one attempt. */
export function attemptsSection(r: Run): HTMLElement | null {
  const attempts = attemptsOf(r);
  if (attempts.length < 2) return null;
  const head = ['attempt', 'started', 'ended', 'host', 'pid', 'end', 'from step', 'resumed from step'];
  const row = (a: Attempt) => h('tr', { class: 'attempt', 'data-attempt': String(a.n) },
    h('td', { class: 'num' }, a.n),
    h('td', {}, when(a.startedAt)),
    h('td', {}, when(a.endedAt)),
    h('td', {}, a.host || '?'),
    h('td', { class: 'num' }, a.pid),
    h('td', { class: 'attempt-end' }, a.state ? `${a.state}${a.reason ? ` (${a.reason})` : ''}` : 'running'),
    h('td', { class: 'num from-step' }, a.fromStep),
    h('td', { class: 'num resumed-from' }, typeof a.resumedFromStep === 'number' ? a.resumedFromStep : '—'));
  const superseded = supersededRowsOf(r);
  return h('details', { id: 'run-attempts', class: 'attempts', open: attempts.length <= OPEN_UP_TO },
    h('summary', {}, h('h2', {}, `Attempts (${attempts.length})`)),
    h('table', { class: 'runs attempts-table' },
      h('thead', {}, h('tr', {}, ...head.map((t) => h('th', {}, t)))),
      h('tbody', {}, ...attempts.map(row))),
    superseded ? h('p', { class: 'muted', id: 'superseded-note' }, `${superseded} row(s) of earlier attempts lie above the step a later attempt resumed from: superseded, left out of the charts unless "show superseded rows" is on`) : null);
}

/** "forked from RUN at step N", or null for a run that is not a fork. */
export function forkLine(r: Run): HTMLElement | null {
  const f = (r.metadata as { forkedFrom?: { runId?: unknown; step?: unknown } }).forkedFrom;
  if (!f || typeof f.runId !== 'string') return null;
  return h('p', { id: 'run-fork', class: 'muted' }, 'forked from ', link(['runs', f.runId], f.runId, { id: 'fork-source' }), ` at step ${String(f.step)} (its rows up to that step were copied)`);
}

/** A marker per attempt after the first, where it took over: its boundary step, or its start time. */
export function attemptMarkers(r: Run): Marker[] {
  return attemptsOf(r).filter((a) => a.n > 1).map((a) => {
    const step = boundaryStep(a);
    const how = typeof a.resumedFromStep === 'number' ? `resumed from step ${a.resumedFromStep}` : `continued after step ${step}`;
    return {
      label: `attempt ${a.n}`,
      title: `attempt ${a.n}: ${how}, started ${when(a.startedAt)} on ${a.host || '?'} pid ${a.pid}`,
      step, time: a.startedAt,
      attrs: { class: 'chart-marker attempt-marker', 'data-attempt': String(a.n), 'data-step': String(step) },
    };
  });
}
