// Alerts on their way out (docs/alerts.md): one file per alert and sink under
// $LOGD_DIR/alerts/{pending,sent,failed}/, so a daemon restart sends what was
// pending and an alert is sent once (its file name is a hash of the sink and
// the event's key: an event seen again, by a second rank's run or after a
// restart, finds its file and is not queued twice). A sender loop POSTs due
// alerts with a deadline per POST, retries with backoff (1 s doubling to
// 30 s) and gives up after LOGD_ALERT_GIVEUP_MS (15 min), keeping the last
// error. It never runs on the ingest path: enqueue() writes one small file.
// Many alerts due at once for one sink go as one summary.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import type { Sink } from './config.js';
import { describeTarget } from './config.js';
import { alertBody, summaryBody, type Alert } from './alert.js';

export interface OutboxItem {
  alert: Alert;
  sink: string;
  state: 'pending' | 'sent' | 'failed';
  attempts: number;
  createdAt: number;
  nextAt: number;
  sentAt?: number;
  /** The receiver's last answer or the error, never the URL. */
  last?: string;
}

/** Due alerts for one sink beyond this many go as one summary POST. */
export const SUMMARY_OVER = 10;
/**
 * New alerts wait for a quiet spell of this long (no newer alert for the same sink) before their first POST, so
 * that a burst (30 runs of one process crashing, seen over several seconds on a loaded node) is one summary, not
 * a few posts and then a summary. A fixed wait after the first alert was not enough: on a loaded 2-core machine
 * the crashes of one process's 30 runs came in over more than 1.5 s and went as 6 posts and a summary.
 */
export const GATHER_MS = 1500;
/** ...but no new alert waits longer than this for the burst to end (a steady trickle still goes out). */
export const GATHER_MAX_MS = 10_000;
/** Sent and failed alerts kept on disk (the oldest go first). */
const KEEP = 500;

export class Outbox {
  private readonly pending = new Map<string, OutboxItem>();
  private readonly busy = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(readonly dir: string, private sinks: Sink[], private readonly o: { giveUpMs: number; log: (m: string) => void }) {
    for (const d of ['pending', 'sent', 'failed']) fs.mkdirSync(path.join(dir, d), { recursive: true, mode: 0o700 });
    for (const f of fs.readdirSync(path.join(dir, 'pending'))) {
      if (!f.endsWith('.json')) continue;
      try {
        const item = JSON.parse(fs.readFileSync(path.join(dir, 'pending', f), 'utf8')) as OutboxItem;
        this.pending.set(f, { ...item, nextAt: Math.min(item.nextAt, Date.now()) });
      } catch {
        fs.rmSync(path.join(dir, 'pending', f), { force: true }); // a half-written file of a crash
      }
    }
    if (this.pending.size) o.log(`alerts: ${this.pending.size} alert(s) pending from before; sending them`);
  }

  start(everyMs = 250): void {
    this.timer = setInterval(() => this.tick(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  private fileOf(sink: string, key: string): string {
    return `${createHash('sha256').update(`${sink}\u0000${key}`).digest('hex').slice(0, 32)}.json`;
  }

  /** Queues the alert for every sink whose filter takes it; an alert already queued, sent or given up is not queued again. */
  enqueue(a: Alert): number {
    let n = 0;
    for (const s of this.sinks) {
      if (!s.kinds.includes(a.kind)) continue;
      if (s.projects && !s.projects.includes(a.project)) continue;
      if (s.groups && !s.groups.includes(a.group)) continue;
      const f = this.fileOf(s.name, a.key);
      if (this.pending.has(f) || ['sent', 'failed'].some((d) => fs.existsSync(path.join(this.dir, d, f)))) continue;
      const item: OutboxItem = { alert: a, sink: s.name, state: 'pending', attempts: 0, createdAt: Date.now() / 1000, nextAt: Date.now() };
      this.pending.set(f, item);
      this.write('pending', f, item);
      n++;
    }
    return n;
  }

  private write(where: 'pending' | 'sent' | 'failed', f: string, item: OutboxItem): void {
    const file = path.join(this.dir, where, f);
    try {
      fs.writeFileSync(`${file}.tmp`, JSON.stringify(item), { mode: 0o600 });
      fs.renameSync(`${file}.tmp`, file);
    } catch (e) {
      // A full disk: the alert is still sent from memory; only a restart before that would lose it.
      this.o.log(`alerts: cannot write ${where}/${f} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); kept in memory`);
    }
  }

  private move(f: string, item: OutboxItem, to: 'sent' | 'failed'): void {
    this.pending.delete(f);
    item.state = to;
    this.write(to, f, item);
    fs.rmSync(path.join(this.dir, 'pending', f), { force: true });
    const dir = path.join(this.dir, to);
    const all = fs.readdirSync(dir).filter((x) => x.endsWith('.json'));
    if (all.length > KEEP) {
      const old = all.map((x) => ({ x, t: fs.statSync(path.join(dir, x)).mtimeMs })).sort((a, b) => a.t - b.t);
      for (const o of old.slice(0, all.length - KEEP)) fs.rmSync(path.join(dir, o.x), { force: true });
    }
  }

  private tick(): void {
    if (this.stopped) return;
    const now = Date.now();
    // Per sink: the newest and the oldest alert not yet tried; new alerts go when the burst has been quiet for
    // GATHER_MS, or when the oldest has waited GATHER_MAX_MS.
    const fresh = new Map<string, { newest: number; oldest: number }>();
    for (const item of this.pending.values()) {
      if (item.attempts !== 0) continue;
      const t = item.createdAt * 1000;
      const f = fresh.get(item.sink);
      if (!f) fresh.set(item.sink, { newest: t, oldest: t });
      else {
        f.newest = Math.max(f.newest, t);
        f.oldest = Math.min(f.oldest, t);
      }
    }
    const holding = (sink: string): boolean => {
      const f = fresh.get(sink);
      return !!f && now - f.newest < GATHER_MS && now - f.oldest < GATHER_MAX_MS;
    };
    const due = new Map<string, Array<[string, OutboxItem]>>();
    for (const [f, item] of this.pending) {
      if (item.nextAt > now || this.busy.has(item.sink)) continue;
      if (item.attempts === 0 && holding(item.sink)) continue;
      const sink = this.sinks.find((s) => s.name === item.sink);
      if (!sink) {
        item.last = `no sink named ${item.sink} any more`;
        this.move(f, item, 'failed');
        continue;
      }
      (due.get(sink.name) ?? due.set(sink.name, []).get(sink.name)!).push([f, item]);
    }
    for (const [name, items] of due) void this.send(this.sinks.find((s) => s.name === name)!, items);
  }

  private async send(sink: Sink, items: Array<[string, OutboxItem]>): Promise<void> {
    this.busy.add(sink.name);
    try {
      const body = items.length > SUMMARY_OVER ? summaryBody(items.map(([, i]) => i.alert), sink.format) : alertBody(items[0][1].alert, sink.format);
      const batch = items.length > SUMMARY_OVER ? items : [items[0]];
      const answer = await post(sink, body);
      const now = Date.now();
      for (const [f, item] of batch) {
        item.attempts++;
        item.last = answer.say;
        if (answer.ok) {
          item.sentAt = now / 1000;
          this.move(f, item, 'sent');
        } else if (now - item.createdAt * 1000 >= this.o.giveUpMs) {
          this.o.log(`alerts: gave up on "${item.alert.title}" to ${sink.name} (${describeTarget(sink)}) after ${item.attempts} attempt(s): ${answer.say}`);
          this.move(f, item, 'failed');
        } else {
          item.nextAt = now + Math.min(30_000, 1000 * 2 ** (item.attempts - 1));
          this.write('pending', f, item);
        }
      }
      if (!answer.ok && batch[0][1].attempts === 1) this.o.log(`alerts: ${sink.name} (${describeTarget(sink)}) did not take an alert (${answer.say}); retrying with backoff`);
    } finally {
      this.busy.delete(sink.name);
    }
  }

  /** Every alert on disk, newest first: pending, sent and given up. */
  static list(dir: string): OutboxItem[] {
    const out: OutboxItem[] = [];
    for (const d of ['pending', 'sent', 'failed']) {
      let files: string[] = [];
      try {
        files = fs.readdirSync(path.join(dir, d)).filter((x) => x.endsWith('.json'));
      } catch {
        continue;
      }
      for (const f of files) {
        try {
          out.push({ ...(JSON.parse(fs.readFileSync(path.join(dir, d, f), 'utf8')) as OutboxItem), state: d as OutboxItem['state'] });
        } catch {
          /* half-written */
        }
      }
    }
    return out.sort((a, b) => b.createdAt - a.createdAt);
  }
}

/** One delivery with the sink's deadline (a POST, or the sink's command); the answer in words, never the URL or the command. */
export async function post(sink: Sink, body: unknown): Promise<{ ok: boolean; say: string }> {
  if (sink.command !== null) return runCommand(sink, body);
  try {
    const res = await fetch(sink.url, {
      method: 'POST', headers: { 'content-type': 'application/json', 'user-agent': 'logd-alerts' }, body: JSON.stringify(body),
      redirect: 'error', signal: AbortSignal.timeout(sink.timeoutMs),
    });
    let text = '';
    try {
      const reader = res.body?.getReader();
      if (reader) {
        const first = await Promise.race([reader.read(), new Promise<null>((r) => setTimeout(() => r(null), 1000))]);
        if (first && first.value) text = Buffer.from(first.value).toString('utf8', 0, Math.min(200, first.value.byteLength));
        void reader.cancel().catch(() => {});
      }
    } catch {
      /* the status is what counts */
    }
    const say = `HTTP ${res.status}${text.trim() ? `: ${text.trim().replace(/\s+/g, ' ').slice(0, 120)}` : ''}`;
    return { ok: res.status >= 200 && res.status < 300, say };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    // The cause's code or message (ECONNREFUSED, "bad port"): never the URL, which holds the receiver's token.
    const why = err.name === 'TimeoutError' || err.name === 'AbortError' ? `no answer within ${sink.timeoutMs} ms`
      : (err.cause?.code ?? err.cause?.message ?? err.message).replace(/https?:\/\/\S+/g, '(the URL)').slice(0, 200);
    return { ok: false, say: why };
  }
}

/** Output of a command sink kept for its answer. */
const COMMAND_SAYS = 2000;

/**
 * A command sink's delivery: `/bin/sh -c COMMAND` in its own process group, the body as JSON on stdin, the alert's
 * kind, title, text, link, run, group and project in LOGD_ALERT_* variables. Exit 0 is delivered; another exit,
 * a signal or the deadline (the group is killed) is a failure, retried with backoff. Its answer: the exit and
 * the start of its stderr (else stdout).
 */
function runCommand(sink: Sink, body: unknown): Promise<{ ok: boolean; say: string }> {
  const b = body as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v));
  // logd's own secrets (the shared store's URL, the webhook's) stay with the daemon: the command gets the rest.
  const { LOGD_UPLOAD_URL: _u, LOGD_STORE_URL: _s, LOGD_ALERT_WEBHOOK: _w, ...rest } = process.env;
  const env = { ...rest, LOGD_ALERT_KIND: str(b.kind), LOGD_ALERT_TITLE: str(b.title), LOGD_ALERT_TEXT: str(b.text), LOGD_ALERT_LINK: str(b.link),
    LOGD_ALERT_RUN: str(b.runId), LOGD_ALERT_GROUP: str(b.group), LOGD_ALERT_PROJECT: str(b.project), LOGD_ALERT_SINK: sink.name };
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn('/bin/sh', ['-c', sink.command!], { stdio: ['pipe', 'pipe', 'pipe'], detached: true, env });
    } catch (e) {
      return resolve({ ok: false, say: `the command could not start: ${(e as Error).message}` });
    }
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => void (out.length < COMMAND_SAYS && (out += d.toString('utf8'))));
    child.stderr!.on('data', (d: Buffer) => void (err.length < COMMAND_SAYS && (err += d.toString('utf8'))));
    child.stdin!.on('error', () => {}); // a command that does not read its stdin
    child.stdin!.end(`${JSON.stringify(body)}\n`);
    let timedOut = false;
    const killer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, sink.timeoutMs);
    let settled = false;
    const done = (r: { ok: boolean; say: string }) => {
      if (settled) return;
      settled = true;
      clearTimeout(killer);
      resolve(r);
    };
    child.on('error', (e) => done({ ok: false, say: `the command could not start: ${e.message}` }));
    child.on('close', (code, sig) => {
      const said = (err.trim() || out.trim()).replace(/\s+/g, ' ').replace(/https?:\/\/\S+/g, '(a URL)').slice(0, 160);
      if (timedOut) return done({ ok: false, say: `no answer within ${sink.timeoutMs} ms (the command was killed)` });
      if (code === 0) return done({ ok: true, say: `exit 0${said ? `: ${said}` : ''}` });
      done({ ok: false, say: `${sig ? `killed by ${sig}` : `exit ${code}`}${said ? `: ${said}` : ''}` });
    });
  });
}
