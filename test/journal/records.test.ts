// The crash journal as data: its records written by the real writer and read
// back by the daemon's reader (compact rows, laps of the ring, media), and
// journals as untrusted input: damaged, truncated, hostile or foreign ones
// never harm the daemon or another run.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, spawnScript, cli, cliJson, waitUntil, startDaemon, daemonPids, alive, ROOT, type TestEnv } from '../helpers.js';
import { NO_ADDON, distJournal, distReader, trainer, lastLogged, expectWhole, waitFinal } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe.skipIf(!!NO_ADDON)(`crash journal: record level and hostile files${NO_ADDON ? ` — ${NO_ADDON}` : ''}`, () => {
  async function writeJournal(dir: string, rows: number, opts: { seal?: number[] } = {}): Promise<string> {
    const { Journal } = await import(distJournal);
    const o = Journal.open(dir, { runId: 'r1', runToken: 'tok', writerId: 'w-1' }, 1);
    expect(o.problem).toBeNull();
    const j = o.journal;
    j.key(0, 'loss');
    j.key(1, 'acc');
    for (let i = 0; i < rows; i++) {
      j.row(i, 1000 + i, new Uint32Array([0, 1]), new Float64Array([i, i / 2]), 0, 2);
      if (opts.seal?.includes(i)) j.seal(opts.seal.indexOf(i) + 1);
    }
    j.close(false);
    return j.file;
  }

  it('N valid records then garbage gives N rows; sealed batches keep their seqs', async () => {
    const { readJournal } = await import(distReader);
    t = makeEnv();
    fs.mkdirSync(t.dataDir, { recursive: true });
    const file = await writeJournal(t.dataDir, 100, { seal: [39] });
    const clean = readJournal(file);
    expect(clean.damaged).toBeNull();
    expect(clean.keys).toEqual(['loss', 'acc']);
    expect(clean.batches.map((b: any) => [b.seq, b.rows])).toEqual([[1, 40], [2, 60]]);
    // Garbage where the next record would start: the 100 rows still read, and the garbage is reported.
    const buf = fs.readFileSync(file);
    const ringOffset = buf.readUInt32LE(40);
    const rowLen = 32 + 8 + 16;
    const end = ringOffset + 100 * rowLen + 16; // 100 rows and one seal
    buf.writeUInt32LE(48, end);
    buf.fill(0xab, end + 4, end + 48);
    fs.writeFileSync(file, buf);
    const c = readJournal(file);
    expect(c.batches.reduce((n: number, b: any) => n + b.rows, 0)).toBe(100);
    expect(c.damaged).toMatch(/checksum|length|type/);
  });

  /** The journal's writer, the daemon's reader and the client's open batch (from dist/), with a fresh data dir. */
  async function journalKit(): Promise<{ readJournal: any; Journal: any; OpenBatch: any }> {
    const { readJournal } = await import(distReader);
    const { Journal } = await import(distJournal);
    const { OpenBatch } = await import(path.join(ROOT, 'dist/client/open-batch.js'));
    t = makeEnv();
    fs.mkdirSync(t.dataDir, { recursive: true });
    return { readJournal, Journal, OpenBatch };
  }

  it('compact rows (ROW_SAME): random rows through the real open batch read back exactly; a batch starts with a full row; a compact row with no full row before it is damaged', async () => {
    const { readJournal, Journal, OpenBatch } = await journalKit();
    const shapes = [
      (i: number) => ({ loss: i, acc: i / 2, lr: 0.001 }),
      (i: number) => ({ acc: -i, loss: i, lr: 1 }), // the same names, another order
      (i: number) => ({ loss: i, acc: i / 2 }),
      (i: number) => ({ loss: i, opt: { lr: i } }), // nested: never the fast path
      (i: number) => ({ loss: i, extra: 7, acc: 1, lr: 2 }),
    ];
    let s = 7;
    const next = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
    for (let round = 0; round < 6; round++) {
      const j = Journal.open(t.dataDir, { runId: 'r1', runToken: 'tok', writerId: `w-${round}` }, 1).journal;
      const b = new OpenBatch();
      b.journal = j;
      const want: string[] = [];
      let seq = 0;
      let shape = 0;
      for (let i = 0; i < 3000; i++) {
        if (next() < 0.02) shape = Math.floor(next() * shapes.length); // runs of one shape, as a loop logs
        const row = shapes[shape](i);
        b.add(row, i, 1000 + i);
        const flat: Record<string, number> = {};
        for (const [k, v] of Object.entries(row)) if (typeof v === 'number') flat[k] = v; else for (const [k2, v2] of Object.entries(v)) flat[`${k}/${k2}`] = v2 as number;
        want.push(`${i}:${JSON.stringify(Object.entries(flat))}`);
        if (next() < 0.01) {
          b.seal(++seq, 0); // as the writer seals: the open batch, then the journal
          j.seal(seq);
        }
      }
      j.close(false);
      const c = readJournal(j.file);
      expect(c.damaged, `round ${round}`).toBeNull();
      const got: string[] = [];
      for (const batch of c.batches) {
        const f64 = (u: Uint8Array) => new Float64Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength));
        const u32 = (u: Uint8Array) => new Uint32Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength));
        const steps = f64(batch.steps), counts = u32(batch.counts), ids = u32(batch.keyIds), vals = f64(batch.values);
        let p = 0;
        for (let r = 0; r < steps.length; r++) {
          const pairs: Array<[string, number]> = [];
          for (let k = 0; k < counts[r]; k++, p++) pairs.push([c.keys[ids[p]], vals[p]]);
          got.push(`${steps[r]}:${JSON.stringify(pairs)}`);
        }
      }
      expect(got, `round ${round}`).toEqual(want);
      // Many rows took the compact form (nested rows never do).
      const buf = fs.readFileSync(j.file);
      let pos = buf.readUInt32LE(40);
      const types = new Map<number, number>();
      for (let len = buf.readUInt32LE(pos); len !== 0; pos += len, len = buf.readUInt32LE(pos)) types.set(buf.readUInt16LE(pos + 8), (types.get(buf.readUInt16LE(pos + 8)) ?? 0) + 1);
      expect(types.get(6) ?? 0, `round ${round}: compact rows`).toBeGreaterThan(1000);
    }
    // A forged head that points at a compact row: no full row before it in its batch, so it is damaged, not guessed.
    const j = Journal.open(t.dataDir, { runId: 'r1', runToken: 'tok', writerId: 'w-forged' }, 1).journal;
    const b = new OpenBatch();
    b.journal = j;
    for (let i = 0; i < 5; i++) b.add({ loss: i, acc: i }, i, 1000 + i);
    j.close(false);
    const buf = fs.readFileSync(j.file);
    const ring = buf.readUInt32LE(40);
    expect(buf.readUInt16LE(ring + 8)).toBe(1); // the batch's first row is full
    expect(buf.readUInt16LE(ring + 56 + 8)).toBe(6); // the next is compact (32 + 8 ids + 16 values = 56 bytes before it)
    expect(readJournal(j.file).batches[0].rows).toBe(5);
    buf.writeDoubleLE(56, 16); // head
    fs.writeFileSync(j.file, buf);
    const c = readJournal(j.file);
    expect(c.damaged).toMatch(/no full row before it/);
    expect(c.batches).toHaveLength(0);
  });

  it('through many laps of the ring (early wraps while acks keep up, a full ring while they do not): a read at any moment gives exactly the rows not yet acknowledged', async () => {
    const { readJournal, Journal, OpenBatch } = await journalKit();
    const j = Journal.open(t.dataDir, { runId: 'r1', runToken: 'tok', writerId: 'w-laps' }, 16).journal; // a 14 MiB ring: early wraps start at 8 MiB
    const b = new OpenBatch();
    b.journal = j;
    let s = 11;
    const next = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
    const batches: Array<{ seq: number; steps: number[] }> = []; // sealed, not yet acknowledged
    let open: number[] = [];
    let seq = 0;
    let acked = 0;
    let behind = false; // the daemon stops acknowledging for a while: the ring fills, rows go uncounted in it
    const checks = { reads: 0, wraps: 0, full: 0 };
    let lastTailRel = 0;
    const row: Record<string, number> = {};
    for (let k = 0; k < 10; k++) row[`m${k}`] = k;
    for (let i = 0; i < 400_000; i++) {
      const before = j.notJournaled;
      b.add(i % 7 === 0 ? { ...row, loss: i, extra: 2 } : { ...row, loss: i }, i, 1000 + i);
      if (j.notJournaled === before) open.push(i);
      else checks.full++;
      if (i % 500 === 499) {
        b.seal(++seq, 0);
        j.seal(seq);
        batches.push({ seq, steps: open });
        open = [];
      }
      if (i % 10_000 === 0) behind = (i >= 200_000 && i < 340_000) || next() < 0.3; // 140 k rows unacknowledged: more than the ring holds
      if (!behind && batches.length > 2 && next() < 0.01) {
        acked = batches[batches.length - 3].seq; // two batches stay in flight
        j.acked(acked);
        while (batches.length && batches[0].seq <= acked) batches.shift();
      }
      const rel = (j as any).tailRel as number;
      if (rel < lastTailRel) checks.wraps++;
      lastTailRel = rel;
      if (i % 25_000 === 12_345) {
        const c = readJournal(j.file);
        expect(c.damaged, `row ${i}`).toBeNull();
        const got = c.batches.map((x: any) => [x.seq, Array.from(new Float64Array(x.steps.buffer.slice(x.steps.byteOffset, x.steps.byteOffset + x.steps.byteLength)))]);
        const want = batches.filter((x) => x.steps.length).map((x) => [x.seq, x.steps]);
        if (open.length) want.push([seq + 1, open]);
        expect(got, `row ${i}`).toEqual(want);
        checks.reads++;
      }
    }
    j.close(false);
    expect(checks.reads).toBe(16);
    expect(checks.wraps, 'the ring went round').toBeGreaterThan(3);
    expect(checks.full, 'a behind daemon filled the ring').toBeGreaterThan(0);
  });

  it('media records: a valid one is read back as the Media it was; garbage, an image that is not one and a bad key are left out, never their batch\'s rows', async () => {
    const { readJournal } = await import(distReader);
    const { Journal } = await import(distJournal);
    const { encode } = await import(path.join(ROOT, 'dist/client/transport/codec.js'));
    t = makeEnv();
    fs.mkdirSync(t.dataDir, { recursive: true });
    const j = Journal.open(t.dataDir, { runId: 'r1', runToken: 'tok', writerId: 'w-1' }, 1).journal;
    j.key(0, 'loss');
    const hist = { key: 'grad/w', step: 3, time: 1000, kind: 'histogram', counts: new Uint8Array(new Float64Array([1, 2]).buffer), edges: new Uint8Array(new Float64Array([0, 1, 2]).buffer) };
    j.row(0, 1000, new Uint32Array([0]), new Float64Array([0.5]), 0, 1);
    j.update(4, encode('Media', hist)); // valid
    j.update(4, new Uint8Array([0xff, 0xff, 0xff, 0xff, 0x0f])); // not a protobuf message
    j.update(4, encode('Media', { key: 'img', step: 3, time: 1000, kind: 'image', data: new Uint8Array([1, 2, 3]), format: 'png', width: 1, height: 1 })); // no PNG
    j.update(4, encode('Media', { ...hist, key: '_step' })); // a reserved name
    j.row(1, 1001, new Uint32Array([0]), new Float64Array([0.25]), 0, 1);
    j.close(false);
    const c = readJournal(j.file);
    expect(c.damaged).toBeNull();
    expect(c.batches).toHaveLength(1);
    expect(c.batches[0].rows).toBe(2);
    expect(c.batches[0].media.map((m: any) => [m.key, m.kind, Number(m.step)])).toEqual([['grad/w', 'histogram', 3]]);
  });

  it('one process keeps 128 MiB of full-size journals open at most: writers opened past that get 10 MiB ones, and a closed one frees its room', async () => {
    const { Journal } = await import(distJournal);
    const dir = fs.mkdtempSync(path.join(ROOT, '.tmp-journal-budget-'));
    try {
      const open = (i: number) => Journal.open(dir, { runId: `r${i}`, runToken: 'tok', writerId: `w-${i}` }, 64).journal;
      const js = [0, 1, 2, 3].map(open);
      const sizes = () => js.map((j) => fs.statSync(j.file).size / 2 ** 20);
      expect(sizes()).toEqual([64, 64, 10, 10]);
      // a small journal is a whole one: its rows are read back
      js[2].key(0, 'loss');
      for (let i = 0; i < 100; i++) js[2].row(i, 1000 + i, new Uint32Array([0]), new Float64Array([i]), 0, 1);
      js[2].seal(1);
      const back = (await import(distReader)).readJournal(js[2].file);
      expect(back.batches.reduce((a: number, b: { rows: number }) => a + b.rows, 0)).toBe(100);
      js[0].close(true);
      js.push(open(4)); // 64 + 10 + 10 open: a fourth 64 would pass 128
      expect(fs.statSync(js[4].file).size / 2 ** 20).toBe(10);
      js[1].close(true);
      js.push(open(5)); // 10 + 10 + 10 open
      expect(fs.statSync(js[5].file).size / 2 ** 20).toBe(64);
      for (const j of js) j.close(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a flipped byte inside a row: the rows before it are read, the damage is reported, nothing after it is trusted', async () => {
    const { readJournal } = await import(distReader);
    t = makeEnv();
    fs.mkdirSync(t.dataDir, { recursive: true });
    const file = await writeJournal(t.dataDir, 50);
    const buf = fs.readFileSync(file);
    const ringOffset = buf.readUInt32LE(40);
    buf[ringOffset + 20 * 56 + 45] ^= 0x10; // a value byte of row 20
    fs.writeFileSync(file, buf);
    const c = readJournal(file);
    expect(c.batches.reduce((n: number, b: any) => n + b.rows, 0)).toBe(20);
    expect(c.damaged).toMatch(/fails its checksum/);
  });

  it('refuses a truncated file, random bytes, a symlink, a FIFO and a 10 GB sparse file, each with its reason', async () => {
    const { readJournal } = await import(distReader);
    t = makeEnv();
    fs.mkdirSync(t.dataDir, { recursive: true });
    const good = await writeJournal(t.dataDir, 10);
    const cut = path.join(t.dataDir, 'cut.journal');
    fs.writeFileSync(cut, fs.readFileSync(good).subarray(0, 2000));
    expect(readJournal(cut)).toMatch(/shorter than a journal's header/);
    const rnd = path.join(t.dataDir, 'random.journal');
    fs.writeFileSync(rnd, Buffer.from(Array.from({ length: 200_000 }, () => Math.floor(Math.random() * 256))));
    expect(readJournal(rnd)).toMatch(/wrong magic/);
    const link = path.join(t.dataDir, 'link.journal');
    fs.symlinkSync(good, link);
    expect(readJournal(link)).toMatch(/symbolic link/);
    const huge = path.join(t.dataDir, 'huge.journal');
    const fd = fs.openSync(huge, 'w');
    fs.ftruncateSync(fd, 10 * 1024 ** 3);
    fs.closeSync(fd);
    expect(readJournal(huge)).toMatch(/more than any journal/);
    // A good header whose regions claim more than the file holds (a truncated copy).
    const short = path.join(t.dataDir, 'short.journal');
    fs.writeFileSync(short, fs.readFileSync(good).subarray(0, 300_000));
    expect(readJournal(short)).toMatch(/regions do not fit/);
  });

  it('the daemon stays up with hostile journals in its spool, stores nothing a token does not open, and reports each', async () => {
    t = makeEnv();
    // A real run with a real writer, killed, whose journal is then rewritten to name another run's id and a wrong token.
    const p = spawnScript(t, trainer(t), ['victim']);
    await waitUntil(() => lastLogged(p.lines) > 500, 30_000, 'the trainer to log');
    const victim = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    const spool = path.join(t.dataDir, 'spool');
    const mine = fs.readdirSync(spool).find((n) => n.startsWith(victim) && n.endsWith('.journal'))!;
    const daemons = daemonPids(t.dir);
    for (const pid of daemons) process.kill(pid, 'SIGKILL');
    p.kill('SIGKILL');
    await p.closed;
    await waitUntil(() => daemons.every((pid) => !alive(pid)), 5000, 'the daemon to die');
    const buf = fs.readFileSync(path.join(spool, mine));
    // Wrong token: same run id, the identity rewritten and re-checksummed as an attacker would.
    const idLen = buf.readUInt32LE(48);
    const id = JSON.parse(buf.toString('utf8', 56, 56 + idLen));
    const forged = Buffer.from(JSON.stringify({ ...id, runToken: 'not-the-token', writerId: 'w-forged' }));
    const zlib = await import('node:zlib');
    const f = Buffer.from(buf);
    f.fill(0, 56, 56 + 3000);
    forged.copy(f, 56);
    f.writeUInt32LE(forged.byteLength, 48);
    f.writeUInt32LE(zlib.crc32(forged) >>> 0, 52);
    fs.writeFileSync(path.join(spool, `${victim}--w-forged.journal`), f, { mode: 0o600 });
    fs.writeFileSync(path.join(spool, 'x--random.journal'), Buffer.from(Array.from({ length: 100_000 }, () => Math.floor(Math.random() * 256))), { mode: 0o600 });
    fs.symlinkSync('/etc/passwd', path.join(spool, 'x--link.journal'));
    const sparse = fs.openSync(path.join(spool, 'x--huge.journal'), 'w', 0o600);
    fs.ftruncateSync(sparse, 10 * 1024 ** 3);
    fs.closeSync(sparse);
    const printed = lastLogged(p.lines);
    await startDaemon(t);
    const info = await waitFinal(t, victim);
    const rows = await expectWhole(t, victim, printed);
    // The forged journal's rows are the same steps again: had it been ingested, steps would repeat or writers grow.
    expect(info.metadata.writers.map((w: any) => w.writerId)).not.toContain('w-forged');
    expect(rows).toBeLessThan(printed + 500);
    const status = await cliJson(t, ['status']);
    const lines = status.storeProblems.join('\n');
    expect(lines).toMatch(/w-forged\.journal: its run .* token does not open it/);
    expect(lines).toMatch(/x--random\.journal refused: it has no journal header/);
    expect(lines).toMatch(/x--link\.journal refused: it is a symbolic link/);
    expect(lines).toMatch(/x--huge\.journal refused: it is 10737418240 bytes long/);
    expect(fs.readFileSync('/etc/passwd', 'utf8')).toMatch(/^root:/); // the link's target untouched
    const r = await cli(t, ['status']);
    expect(r.exitCode).toBe(0);
  });
});
