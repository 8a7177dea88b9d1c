// init() never ends training (issue 24): when no daemon can be used at start
// (none can be started or reached, the data dir is unwritable or full, the
// daemon refuses), the run goes on **deferred**. log() keeps working; the
// rows wait in this process (memory, then the overflow file); the client
// keeps trying to create the run (same id and create key, so never twice)
// and, once a daemon answers, hands everything over and goes on as usual.
// A process that ends first writes a spill file carrying the create request:
// the daemon of that data dir creates the run from it at its next start (or
// `logd sync --ingest FILE`). `onError: 'raise'` or LOGD_ON_ERROR=raise keeps
// the old behaviour: init() throws.
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { resolvePaths } from '../src/config.js';
import { deferredFallbackDir } from '../src/deferred.js';
import type { DeferredCreate } from '../src/spill.js';
import type { RunInfo, ServiceAddress } from '../src/wire.js';
import { CallError } from './connection.js';
import type { BatchWriter } from './writer.js';

export type OnError = 'raise' | 'defer';

/** Whether an init() failure should throw (asked for, or a programming error) instead of deferring the run. */
export function raiseOnError(onError: OnError | undefined, e: unknown): boolean {
  if ((onError ?? process.env.LOGD_ON_ERROR) === 'raise') return true;
  if (e instanceof TypeError || e instanceof RangeError) return true; // a bad option or id: the caller's bug, said at once
  // INVALID_ARGUMENT, ALREADY_EXISTS (a taken id, a run to continue that a live owner holds) and NOT_FOUND
  // (resume 'must' of an unknown run) are about the request, not about a daemon that cannot be used.
  return e instanceof CallError && (e.code === 3 || e.code === 6 || e.code === 5);
}

function writable(dir: string): boolean {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.accessSync(dir, fs.constants.W_OK);
    const probe = `${dir}/.probe-${process.pid}-${randomBytes(4).toString('hex')}`;
    fs.writeFileSync(probe, '', { mode: 0o600 });
    fs.rmSync(probe);
    return true;
  } catch {
    return false;
  }
}

/** Room for a deferred run's files: a full disk takes a probe's empty file, and then not one row. */
const SPOOL_ROOM_BYTES = 8 * 1024 * 1024;

function hasRoom(dir: string): boolean {
  try {
    const st = fs.statfsSync(dir);
    return st.bavail * st.bsize >= SPOOL_ROOM_BYTES;
  } catch {
    return true; // cannot tell: the write says
  }
}

/**
 * Where a deferred run's overflow and spill files go: the data dir's spool
 * when it takes files and has room, else the user's private fallback
 * (src/deferred.ts), which the daemon of this data dir reads at start and
 * every few seconds while it runs.
 */
export function deferredSpool(): string {
  const paths = resolvePaths();
  if (writable(paths.spoolDir) && hasRoom(paths.spoolDir)) return paths.spoolDir;
  const fallback = deferredFallbackDir(paths.dataDir);
  writable(fallback);
  return fallback;
}

/** The RunInfo a deferred run starts with (nothing of it came from a daemon). */
export function deferredInfo(request: { id: string; project: string; name: string; group: string; jobType: string; configJson: string; tags: string[]; mode: string; notes: string }, spoolDir: string): RunInfo {
  return {
    id: request.id, project: request.project || 'default', name: request.name || request.id, group: request.group, jobType: request.jobType, tags: request.tags,
    state: 'running', stateReason: 'deferred: no daemon yet', createdAt: Date.now() / 1000, finishedAt: 0, exitCode: 0,
    configJson: request.configJson, summaryJson: '{}', metadataJson: '{}', historyRows: 0, writers: 1,
    runToken: randomBytes(18).toString('base64url'), mode: request.mode, notes: request.notes, ownerWriterId: `w-${randomBytes(6).toString('hex')}`, spoolDir,
  };
}

export function deferredCreate(request: Omit<DeferredCreate, 'reason'> & Record<string, unknown>, reason: string): DeferredCreate {
  const { project, name, group, jobType, configJson, tags, notes, mode, client, createKey } = request;
  return { project, name, group, jobType, configJson, tags, notes, mode, client, createKey, reason };
}

/**
 * Keeps trying to create the deferred run (2 s, doubling to 60 s) until a
 * daemon answers, then hands the writer over to it. The timer never keeps
 * the process alive. Returns a function that stops trying.
 */
export function retryCreate(
  writer: BatchWriter,
  create: () => Promise<{ value: RunInfo; address: ServiceAddress }>,
  onCreated: (info: RunInfo) => void,
): () => void {
  let delay = 2000;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const attempt = async () => {
    timer = null;
    if (stopped || !writer.deferred || writer.closed) return;
    try {
      const { value: info, address } = await create();
      if (stopped || !writer.deferred) return;
      writer.undefer(address, info.runToken, info.ownerWriterId, info.spoolDir || resolvePaths().spoolDir);
      onCreated(info);
      return;
    } catch {
      /* still no daemon: try again later */
    }
    delay = Math.min(delay * 2, 60_000);
    schedule();
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => void attempt(), delay);
    timer.unref();
  };
  schedule();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

