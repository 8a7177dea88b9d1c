// Console output and media in the shared store, from a record log written
// here frame by frame (so that every case is there: an image entry marked
// lost, one whose file is gone, an image logged again, a writer whose rank
// came in an earlier slice, a frame of more entries than a page): uploaded
// through the real uploader loop slice by slice, read back through the shared
// source page by page, and never written twice by a retry or a second uploader.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { encodeFrame } from '../../src/frames.js';
import { FrameType, jsonFrame, type ConsoleEntry, type MediaEntry, type WriterMeta } from '../../daemon/store/format.js';
import { writeImage } from '../../daemon/store/media.js';
import type { RunRow } from '../../daemon/store/index-db.js';
import type { LocalRuns } from '../../daemon/upload/local-runs.js';
import { Uploader } from '../../daemon/upload/uploader.js';
import { PgSink, STREAM_HISTORY } from '../../daemon/upload/pg-sink.js';
import { encodeSlice } from '../../daemon/upload/encode.js';
import { parseStoreUrl } from '../../daemon/upload/url.js';
import { SharedSource } from '../../daemon/query/shared.js';
import type { ConsoleLine, MediaItem } from '../../daemon/query/source.js';

const why = pgUnavailable();
let pgc: PgCluster;
let dir: string;

const RUN = 'mslices1';
const IMAGES = 12; // distinct images of 200 KiB: about 2.4 MiB, several 1 MiB slices

function writer(idx: number, rank: number | null): WriterMeta {
  return { idx, writerId: `w${idx}`, pid: 100 + idx, host: 'h', rank: rank === null ? null : { rank, localRank: rank, worldSize: 8, nodeRank: 0, localWorldSize: 8 }, joinedAt: 1 };
}

/** The run's log as a list of frames, and what a reader should get back from it. */
function makeRun(runDir: string) {
  const frames: Buffer[] = [];
  const put = (type: number, obj: unknown) => frames.push(encodeFrame(type, jsonFrame(obj)));
  const lines: ConsoleLine[] = [];
  const items: MediaItem[] = [];
  const ranks = new Map<number, number | null>();
  const consoleFrame = (w: number, entries: ConsoleEntry[]) => {
    put(FrameType.CONSOLE, { writerIdx: w, entries });
    for (const e of entries) lines.push({ w, rank: ranks.get(w) ?? null, t: e.t, s: e.s, l: e.l.replaceAll('\0', '\uFFFD') });
  };
  const mediaFrame = (w: number, entries: MediaEntry[]) => {
    put(FrameType.MEDIA, { writerIdx: w, entries });
    for (const e of entries) items.push({ w, rank: ranks.get(w) ?? null, ...e });
  };
  const join = (w: WriterMeta) => {
    put(FrameType.WRITER, w);
    ranks.set(w.idx, w.rank ? w.rank.rank : null);
  };

  const same = crypto.randomBytes(1000);
  const sameSha = writeImage(runDir, same, 'png');
  const image = (key: string, step: number, sha: string, bytes: number): MediaEntry => ({ key, step, t: 2 + step, kind: 'image', sha256: sha, format: 'png', width: 10, height: 10, bytes, caption: `${key} ${step}` });
  const gone = crypto.createHash('sha256').update('never written').digest('hex');

  join(writer(0, 3));
  join(writer(1, 5));
  consoleFrame(0, [{ t: 1, s: 'out', l: 'hello\n' }, { t: 1.5, s: 'err', l: 'a NUL \0 in a line\n' }]);
  mediaFrame(0, [
    { key: 'grad/w', step: 0, t: 2, kind: 'histogram', counts: [1, 2, 3], edges: [0, 0.5, 1, 2], nonfinite: 1 },
    image('sample', 0, sameSha, same.length),
    { key: 'sample', step: 1, t: 3, kind: 'image', format: 'png', width: 4, height: 3, bytes: 50, lost: 'the image could not be stored: ENOSPC' },
    image('gone', 1, gone, 70),
    { key: 'note', step: 1, t: 3, kind: 'text', text: 'generation: <b>hi</b>' },
  ]);
  const distinct = new Map<string, Buffer>([[sameSha, same]]);
  for (let i = 0; i < IMAGES; i++) {
    const data = crypto.randomBytes(200 * 1024);
    const sha = writeImage(runDir, data, 'png');
    distinct.set(sha, data);
    mediaFrame(1, [image('big', 10 + i, sha, data.length), image('sample', 10 + i, sameSha, same.length), { key: 'note', step: 10 + i, t: 12 + i, kind: 'text', text: `text ${i}` }]);
    consoleFrame(1, [{ t: 12 + i, s: 'out', l: `step ${i}\n` }]);
  }
  // Writer 0 again, slices after its WRITER frame: its rank comes from the store.
  consoleFrame(0, Array.from({ length: 25 }, (_, i) => ({ t: 40 + i, s: 'out' as const, l: `burst ${i}\n` })));
  mediaFrame(0, [{ key: 'grad/w', step: 50, t: 60, kind: 'histogram', counts: [4], edges: [0, 1] }]);
  return { log: Buffer.concat(frames), lines, items, distinct, gone };
}

const row: RunRow = {
  id: RUN, project: 'p', name: RUN, grp: 'g', job_type: '', tags: '[]', state: 'running', state_reason: '', created_at: 1, finished_at: 0, exit_code: 0,
  config_json: '{}', summary_json: '{}', metadata_json: '{}', history_rows: 0, mode: 'online', notes: '',
};

function localRuns(logFile: string): LocalRuns {
  return {
    dataDir: path.dirname(logFile), ids: () => [RUN], logFile: () => logFile, durableBytes: () => fs.statSync(logFile).size, mode: () => 'online', historyRows: () => 0,
    row: () => row, systemLog: () => null, syncRequested: () => false, offsetBase: () => 0,
  };
}

const count = (table: string) => Number(pgc.psql(`SELECT count(*) FROM ${table} WHERE run_id = '${RUN}'`, 'logd'));

async function readAll<T>(page: (after: number) => Promise<{ entries: T[]; next: number }>): Promise<{ entries: T[]; pages: number }> {
  const entries: T[] = [];
  let pages = 0;
  for (let after = 0; ; pages++) {
    const p = await page(after);
    entries.push(...p.entries);
    if (!p.next) return { entries, pages: pages + 1 };
    expect(p.next).toBeGreaterThan(after);
    after = p.next;
  }
}

describe.skipIf(why !== null)(`console output and media, slice by slice${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ldt-mslices-'));
  });
  afterAll(() => {
    pgc?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('uploads every piece and entry once across slices and uploader restarts, and reads them back page by page as they were logged', async () => {
    const runDir = path.join(dir, 'runs', RUN);
    fs.mkdirSync(runDir, { recursive: true });
    const { log, lines, items, distinct, gone } = makeRun(runDir);
    const logFile = path.join(runDir, 'records.log');
    fs.writeFileSync(logFile, log);
    const url = parseStoreUrl(pgc.url);
    const said: string[] = [];
    const uploader = () => new Uploader({
      url, node: 'node-x', runs: localRuns(logFile), log: (l) => said.push(l), pollMs: 50, backoffMaxMs: 1000, sliceBytes: 1 << 20, statusDir: null,
    });

    // One slice, then the uploader goes away (a daemon stop) and a new one goes on from the store's cursor.
    const first = uploader();
    expect(await first.pass()).toBe(true);
    await first.stop();
    const cursor = () => Number(pgc.psql(`SELECT log_offset FROM logd_cursors WHERE run_id = '${RUN}'`, 'logd'));
    const afterFirst = cursor();
    expect(afterFirst).toBeGreaterThan(0);
    expect(afterFirst).toBeLessThan(log.length);
    const second = uploader();
    let passes = 1;
    while (await second.pass()) passes++;
    await second.stop();
    expect(cursor()).toBe(log.length);
    // The images count against the slice: 2.4 MiB of them in 1 MiB slices.
    expect(passes).toBeGreaterThanOrEqual(3);
    expect(said.filter((l) => l.includes('missing from its media dir'))).toHaveLength(1);

    expect(count('logd_console')).toBe(lines.length);
    expect(count('logd_media')).toBe(items.length);
    expect(count('logd_images')).toBe(distinct.size); // the lost one and the gone one have no bytes; the repeated one is there once

    // A retry of a slice the store has already: the cursor says so, nothing is written.
    const sink = new PgSink(url, 'node-x');
    try {
      const again = encodeSlice({ file: logFile, runId: RUN, stream: STREAM_HISTORY, from: 0, to: log.length, maxBytes: 1 << 20 });
      expect(await sink.uploadSlice(row, again, false)).toEqual({ offset: log.length, moved: true });
      // Even with the cursor forced back, the keys refuse a second copy (and the transaction leaves nothing).
      pgc.psql(`UPDATE logd_cursors SET log_offset = 0 WHERE run_id = '${RUN}'`, 'logd');
      await expect(sink.uploadSlice(row, again, false)).rejects.toThrow(/duplicate key/);
      pgc.psql(`UPDATE logd_cursors SET log_offset = ${log.length} WHERE run_id = '${RUN}'`, 'logd');
    } finally {
      await sink.close();
    }
    expect(count('logd_console')).toBe(lines.length);
    expect(count('logd_media')).toBe(items.length);

    // Read back in pages of at most 7 entries (a 25-piece frame is a page of its own).
    const src = new SharedSource(url, { entries: 7, bytes: 1 << 20 });
    try {
      await src.check();
      const con = await readAll((after) => src.console(RUN, after));
      expect(con.entries).toEqual(lines);
      expect(con.pages).toBe(3); // 2 + 5 pieces, 7 pieces, then the 25-piece frame whole
      expect(con.entries.at(-1)).toMatchObject({ w: 0, rank: 3, l: 'burst 24\n' });
      const med = await readAll((after) => src.media(RUN, after));
      expect(med.entries).toEqual(items);
      expect(med.pages).toBeGreaterThan(3);
      expect(med.entries.filter((m) => m.w === 1).every((m) => m.rank === 5)).toBe(true);
      expect((await readAll((after) => src.media(RUN, after, { kind: 'histogram' }))).entries).toEqual(items.filter((m) => m.kind === 'histogram'));
      expect((await readAll((after) => src.media(RUN, after, { kind: 'image', key: 'sample' }))).entries)
        .toEqual(items.filter((m) => m.kind === 'image' && m.key === 'sample'));
      expect(await src.media(RUN, 0, { key: 'no such key' })).toEqual({ entries: [], next: 0 });
      for (const [sha, data] of distinct) {
        const img = await src.image(RUN, sha);
        expect(img?.format).toBe('png');
        expect(Buffer.compare(Buffer.from(img!.data), data)).toBe(0);
      }
      expect(await src.image(RUN, gone)).toBeNull();
      await expect(src.console('nosuchrun', 0)).rejects.toThrow(/does not exist/);
      await expect(src.image('nosuchrun', gone)).rejects.toThrow(/does not exist/);
    } finally {
      await src.close();
    }
  }, 60_000);
});
