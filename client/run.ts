// A run as the training code sees it: log(), config, summary, handle(), finish().
import { uncaughtException } from './uncaught.js';
import { randomBytes } from 'node:crypto';
import type { RunInfo, ServiceAddress } from '../src/wire.js';
import { formatServiceAddress } from '../src/wire.js';
import { parseJsonObject, ownRecord } from '../src/json.js';
import type { BatchWriter } from './writer.js';
import { CallError } from './connection.js';
import { gatherEnvironment } from './environment.js';

/** How long finish() waits for the FinishRun sent with its last batch before it waits for the acknowledgement instead. */
const QUICK_FINISH_MS = 10_000;

export type RunState = 'running' | 'finishing' | 'finished' | 'crashed' | 'killed';

export interface LogOptions {
  /** The row's step. Default: one more than the last step this process logged (0 first). */
  step?: number;
}

export interface FinishOptions {
  exitCode?: number;
  /** How long finish may take in all (waiting for acknowledgements and other writers). Default 10 000 ms. */
  timeoutMs?: number;
}

export interface FinishResult {
  state: RunState;
  /** Why finish ended the way it did: writers still attached, records spilled, ... Empty when all went well. */
  message: string;
  timedOut: boolean;
}

export interface RunHandlePayload { v: 1; s: string; r: string; t: string }

export class Config {
  private values: Record<string, unknown>;
  constructor(initial: Record<string, unknown>, private onUpdate: (o: Record<string, unknown>) => void) {
    this.values = ownRecord(initial);
  }
  update(obj: Record<string, unknown>): void {
    Object.assign(this.values, obj);
    this.onUpdate(obj);
  }
  get(key: string): unknown {
    return this.values[key];
  }
  toJSON(): Record<string, unknown> {
    return ownRecord(this.values);
  }
}

export class Summary {
  private values = ownRecord();
  constructor(private onUpdate: (o: Record<string, unknown>) => void) {}
  update(obj: Record<string, unknown>): void {
    Object.assign(this.values, obj);
    this.onUpdate(obj);
  }
  toJSON(): Record<string, unknown> {
    return ownRecord(this.values);
  }
}

const live = new Set<Run>();
export function liveRuns(): Run[] {
  return [...live];
}

export class Run {
  readonly id: string;
  readonly name: string;
  readonly project: string;
  readonly group: string;
  readonly config: Config;
  readonly summary: Summary;
  private nextStep = 0;
  private finishing: Promise<FinishResult> | null = null;
  /** This process's console capture, when this run has it (client/console-capture.ts); ended by finish. */
  consoleCapture: { stop(): void } | null = null;

  constructor(
    info: RunInfo,
    readonly writer: BatchWriter,
    private runToken: string,
    readonly isOwner: boolean,
    private warn: (m: string) => void,
  ) {
    this.id = info.id;
    // A continued run (init({ resume })) goes on from its last stored step (its owner; an attached writer
    // counts its own steps from 0, as before).
    if (isOwner) try {
      const last = (JSON.parse(info.metadataJson || '{}') as { lastStep?: number }).lastStep;
      if (typeof last === 'number' && Number.isSafeInteger(last) && last >= 0) this.nextStep = last + 1;
    } catch {
      /* no metadata: step 0 */
    }
    this.name = info.name;
    this.project = info.project;
    this.group = info.group;
    this.config = new Config(parseJsonObject(info.configJson, 'config'), (o) => writer.config(o));
    this.summary = new Summary((o) => writer.summary(o));
    live.add(this);
  }

  /** Appends one row of metrics. Returns at once; never blocks on I/O. */
  log(data: Record<string, unknown>, opts?: LogOptions): void {
    let step = this.nextStep;
    if (opts && opts.step !== undefined) {
      step = opts.step;
      if (!Number.isSafeInteger(step) || step < 0) throw new TypeError(`logd: step ${step} must be a non-negative integer`);
      this.writer.batch.stepsGiven = true;
    }
    this.writer.add(data, step, Date.now() / 1000);
    this.nextStep = step + 1;
  }

  /**
   * What keeps records from being stored right now, as the daemon or the
   * connection reported it (a full disk, a daemon being restarted, records
   * waiting on disk past the memory bound); null when all is well. Logging
   * goes on meanwhile. Only when memory and disk are both full are rows
   * dropped; the count then stays here (and in the run's metadata).
   */
  get problem(): string | null {
    return this.writer.lastProblem ?? this.writer.dropNote ?? this.writer.journalNote;
  }

  /** A string another process can pass to `attach()` to log into this run. */
  handle(): string {
    const address: ServiceAddress = this.writer.address;
    const p: RunHandlePayload = { v: 1, s: formatServiceAddress(address), r: this.id, t: this.runToken };
    return 'logd1.' + Buffer.from(JSON.stringify(p)).toString('base64url');
  }

  /** Sends what is buffered and waits (up to timeoutMs) until the daemon has it durably. */
  /** A deferred run was created by a daemon, which chose its token. */
  adoptToken(token: string): void {
    this.runToken = token;
  }

  async flush(timeoutMs = 10_000): Promise<boolean> {
    return this.writer.waitAcked(timeoutMs);
  }

  finish(opts: FinishOptions = {}): Promise<FinishResult> {
    this.stopConsole();
    this.finishing ??= this.doFinish(opts.exitCode ?? 0, opts.timeoutMs ?? 10_000);
    return this.finishing;
  }

  private async doFinish(exitCode: number, timeoutMs: number): Promise<FinishResult> {
    // An awaited finish keeps the process alive until it returns (its
    // deadline bounds that). Without this, under load, the event loop could
    // drain while finish waited on the daemon (grpc-js holds no ref on some
    // of its waits): the process then exited 0 without its finish, and the
    // run was marked crashed.
    const hold = setInterval(() => {}, 1 << 30);
    try {
      return await this.finishWithin(exitCode, timeoutMs);
    } finally {
      clearInterval(hold);
    }
  }

  private environmentSent = false;
  private environmentSoon: NodeJS.Immediate | null = null;

  /**
   * Records this process's code and environment (client/environment.ts) on this writer, once. It is gathered
   * just after init() returns (reading the package list takes a few milliseconds the first time), or at the
   * latest when finish() starts; the call goes out on the connection FinishRun takes, so the daemon has it first
   * and finish() waits for nothing. The git facts are the daemon's to read (daemon/code); the run's end waits
   * for those.
   */
  sendEnvironment(): void {
    if (this.environmentSent || this.environmentSoon) return;
    this.environmentSoon = setImmediate(() => this.sendEnvironmentNow());
  }

  private sendEnvironmentNow(): void {
    if (this.environmentSoon) clearImmediate(this.environmentSoon);
    this.environmentSoon = null;
    if (this.environmentSent) return;
    this.environmentSent = true;
    try {
      const env = gatherEnvironment();
      this.writer.connection.unary('setEnvironment', { runId: this.id, runToken: this.runToken, writerId: this.writer.writerId, environmentJson: JSON.stringify(env) }, 5000).catch(() => {
        /* not essential: a daemon that cannot take it leaves the run without it */
      });
    } catch {
      /* no connection (a deferred run): the run goes on without it */
    }
  }

  private async finishWithin(exitCode: number, timeoutMs: number): Promise<FinishResult> {
    if (this.environmentSoon) this.sendEnvironmentNow(); // before FinishRun, on its connection
    if (this.writer.deferred) {
      // No daemon ever created the run: its rows go where a daemon will find them. Nothing to wait for.
      const spilled = this.spillAndSay(this.isOwner ? exitCode : null, 'from which the daemon of this data dir creates and stores the run at its next start (or: logd sync --ingest FILE)');
      this.writer.close();
      live.delete(this);
      const message = `finish: the run is deferred (${this.writer.lastProblem ?? 'no daemon'}); ${spilled}`;
      return { state: 'finishing', message, timedOut: false };
    }
    const deadline = Date.now() + timeoutMs;
    // A little of the deadline is kept for FinishRun in case not everything is
    // acknowledged: a daemon that received everything but cannot write it
    // (a full disk) still finalises the run, and stores it all later.
    const reserve = Math.min(2000, timeoutMs / 4);
    // FinishRun goes out with the last batch, not after its acknowledgement: the daemon waits for every record up
    // to lastSeq to be durable before it answers (one round trip and one disk sync fewer than waiting here
    // first). Its answer without a timeout says they all are. Otherwise (not arrived in time, or no daemon)
    // finish goes on as before: wait for the acknowledgement, hand over through a spill file. It waits at most
    // QUICK_FINISH_MS, the stream's own deadline: a daemon that takes the call and never answers (a stopped one,
    // a listener that is not logd) costs that, then the stream has found the real daemon and the rest goes on.
    this.writer.flush();
    const sent = this.writer.lastSeq;
    this.writer.ensureStream();
    const quick = await this.finishCall(exitCode, Math.min(deadline - reserve, Date.now() + QUICK_FINISH_MS)).catch(() => null);
    if (quick && !quick.timedOut) {
      this.writer.durableUpTo(sent);
      this.writer.close();
      live.delete(this);
      return { state: quick.run.state as RunState, message: quick.message, timedOut: false };
    }
    if (quick && quick.run.state !== 'running' && quick.run.state !== 'finishing') {
      // Final, with a note (a full disk: stored once space is freed; writers still attached): the run_final
      // message acknowledges what is durable; what is not stays in the journal for the daemon.
      await this.writer.waitAcked(Math.min(1000, Math.max(0, deadline - Date.now())));
      this.writer.close();
      live.delete(this);
      if (quick.message) this.warn(`logd: ${quick.message}`);
      return { state: quick.run.state as RunState, message: quick.message, timedOut: quick.timedOut };
    }
    let acked = await this.writer.waitAcked(Math.max(0, deadline - reserve - Date.now()));
    if (!acked && this.isOwner) {
      const res = await this.finishCall(exitCode, deadline).catch(() => null); // unreachable: spilled below
      if (res && res.run.state !== 'running' && res.run.state !== 'finishing') {
        this.writer.close();
        live.delete(this);
        if (res.message) this.warn(`logd: ${res.message}`);
        return { state: res.run.state as RunState, message: res.message, timedOut: res.timedOut };
      }
    }
    acked ||= await this.writer.waitAcked(Math.max(0, deadline - Date.now()));
    if (!acked) {
      // The daemon is unreachable or stuck: hand the records over through a
      // spill file that the daemon ingests, rather than hang or drop them.
      const problem = this.writer.lastProblem;
      // A spill that fails (the spool on the daemon's full disk too) is said, not thrown: the daemon keeps what it received.
      const spilled = this.spillAndSay(this.isOwner ? exitCode : null, 'which the daemon ingests');
      this.writer.close();
      live.delete(this);
      const message = `finish: the daemon did not acknowledge everything within ${timeoutMs} ms${problem ? ` (${problem})` : ''}; ${spilled}. The stream's last events: ${this.writer.streamHistory || 'none'}`;
      this.warn(`logd: ${message}`);
      return { state: 'finishing', message, timedOut: true };
    }
    try {
      const res = await this.finishCall(exitCode, deadline);
      if (res.message && res.timedOut) this.warn(`logd: ${res.message}`);
      return { state: res.run.state as RunState, message: res.message, timedOut: res.timedOut };
    } catch (e) {
      // Everything is durable already; leave the finish itself to the daemon
      // through a spill header it reads once this process is gone.
      const spilled = this.spillAndSay(this.isOwner ? exitCode : null, 'from which the daemon finalises the run once this process exits');
      const message = `finish: ${(e as Error).message}; ${spilled}`;
      this.warn(`logd: ${message}`);
      return { state: 'running', message, timedOut: true };
    } finally {
      this.writer.close();
      live.delete(this);
    }
  }

  /**
   * FinishRun, sent again to the daemon found anew while time is left when
   * the one it went to is gone (UNAVAILABLE: killed or restarting; the
   * records it acknowledged are in its log, which the next daemon recovers).
   * A daemon killed after it finalised the run refuses the retry with
   * FAILED_PRECONDITION; the run's final state is then read back. A call
   * that reaches a restarted daemon with the old token (UNAUTHENTICATED: it
   * was restarted while this writer was idle, or was not up yet when it was
   * looked for) looks for it again.
   */
  /**
   * Sends an alert to the daemon's sinks (docs/alerts.md), with the run, its group and a link. level: info, warn
   * or error. At most 10 per run in any minute. Resolves whether it was queued; never rejects for a daemon that
   * cannot take it (it says why on stderr).
   */
  async alert(title: string, opts: { text?: string; level?: 'info' | 'warn' | 'error'; timeoutMs?: number } = {}): Promise<boolean> {
    const level = opts.level ?? 'info';
    if (!['info', 'warn', 'error'].includes(level)) throw new TypeError(`logd: alert level ${JSON.stringify(level)} must be info, warn or error`);
    if (typeof title !== 'string' || !title.trim()) throw new TypeError('logd: alert title must be a non-empty string');
    try {
      const res = await this.writer.connection.unary<unknown, { queued: boolean; message: string }>('alert',
        { runId: this.id, runToken: this.runToken, title: title.slice(0, 200), text: String(opts.text ?? '').slice(0, 4000), level, alertId: randomBytes(12).toString('hex') },
        opts.timeoutMs ?? 5000);
      if (!res.queued) process.stderr.write(`logd: run.alert(${JSON.stringify(title.slice(0, 80))}) was not sent: ${res.message}\n`);
      return res.queued;
    } catch (e) {
      process.stderr.write(`logd: run.alert(${JSON.stringify(title.slice(0, 80))}) was not sent: ${(e as Error).message}\n`);
      return false;
    }
  }

  private async finishCall(exitCode: number, deadline: number): Promise<{ run: RunInfo; message: string; timedOut: boolean }> {
    let retried = false;
    /** Answers of UNAUTHENTICATED so far: the daemon at the address is not the one this writer found. */
    let unauthenticated = 0;
    for (;;) {
      const left = Math.max(1, deadline - Date.now());
      try {
        return await this.writer.connection.unary<unknown, { run: RunInfo; message: string; timedOut: boolean }>(
          'finishRun',
          { runId: this.id, runToken: this.runToken, writerId: this.writer.writerId, exitCode, timeoutMs: left, lastSeq: this.writer.lastSeq },
          left + 2000,
        );
      } catch (e) {
        if (!(e instanceof CallError)) throw e;
        if (retried && e.code === 9 /* FAILED_PRECONDITION */) {
          const run = await this.writer.connection.unary<unknown, RunInfo>('getRun', { runId: this.id }, Math.max(1, deadline - Date.now()));
          if (run.state !== 'running' && run.state !== 'finishing') return { run, message: '', timedOut: false };
        }
        // UNAUTHENTICATED: the daemon was restarted since this writer found it (a new token at the same socket),
        // under the call or while the writer was idle, and its service file may lag its socket by a moment: look
        // for it again. A token still refused after about 5 s of that is wrong for good.
        const restarted = e.code === 16 /* UNAUTHENTICATED */ && ++unauthenticated <= 25;
        if ((e.code !== 14 /* UNAVAILABLE */ && !restarted) || deadline - Date.now() < 500) throw e;
        retried = true;
        await new Promise((r) => setTimeout(r, 200));
        await this.writer.rediscover();
      }
    }
  }

  /** Gives stdout and stderr back; what the capture still held goes with the last batch. */
  private stopConsole(): void {
    const c = this.consoleCapture;
    this.consoleCapture = null;
    c?.stop();
  }

  /** Spills, and says where to (or, when even that failed, how many rows are lost and why). */
  private spillAndSay(exitCode: number | null, after: string): string {
    try {
      const file = this.writer.spill(exitCode);
      return file ? `unsent records were written to ${file}, ${after}` : 'nothing was left unsent';
    } catch (e) {
      return (e as Error).message;
    }
  }

  /** At process exit: hand everything unsent to the daemon through a spill file. */
  spillForExit(exitCode: number): void {
    this.stopConsole();
    if (this.finishing) {
      // finish() is under way: keep its records, without a second finish.
      this.writer.spill(null);
      return;
    }
    // The exit code finishes the run for an owner and detaches anyone else; an uncaught exception goes with it.
    this.writer.spill(exitCode, uncaughtException());
    this.writer.close();
    live.delete(this);
  }
}
