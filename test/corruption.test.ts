// Issue 9 case 3: a damaged frame in the middle of a finished run's log, with
// a real daemon and the real CLI. The damage is reported (daemon log, `show`,
// `status`, `export`), reads go on at the next valid frame, an index rebuild
// cuts nothing, and the run keeps its final state.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cli, cliJson, exportJsonl, killDaemon, startDaemon, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const ROWS = 10_000;
const writer = `
  const run = await logd.init({ project: 'corrupt' });
  for (let b = 0; b < 20; b++) {
    for (let i = 0; i < ${ROWS / 20}; i++) run.log({ loss: 1 / (b * ${ROWS / 20} + i + 1), acc: i % 7 }, { step: b * ${ROWS / 20} + i });
    await run.flush(); // one history frame per 500 rows
  }
  await run.finish();
  console.log('run ' + run.id);
`;

describe('issue 9 case 3: a corrupt frame in the middle of a run log', () => {
  it('is reported in the log, show, status and export; reads resynchronise; a rebuild cuts nothing', async () => {
    t = makeEnv();
    const r = await runScript(t, script(t, 'w.mjs', writer));
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    await killDaemon(t.dir);
    const file = path.join(t.dataDir, 'runs', id, 'records.log');
    const size = fs.statSync(file).size;
    const buf = fs.readFileSync(file);
    buf[Math.floor(size / 2)] ^= 0x10; // one flipped bit in the middle
    fs.writeFileSync(file, buf);
    const daemon = await startDaemon(t); // standalone: `status` needs it up between the commands

    const shown = await cliJson(t, ['show', id]);
    expect(shown.state).toBe('finished');
    expect(shown.historyRows).toBe(ROWS);
    const damage = shown.metadata.damage;
    expect(damage.regions).toHaveLength(1);
    expect(damage.regions[0].offset).toBeLessThanOrEqual(size / 2);
    expect(damage.regions[0].offset + damage.regions[0].bytes).toBeGreaterThan(size / 2);
    expect(damage.readableRows).toBeGreaterThanOrEqual(ROWS - 500 - 1);
    expect(damage.readableRows).toBeLessThan(ROWS);
    expect(shown.lastRows.at(-1)._step).toBe(ROWS - 1); // the tail is read past the damage
    const text = await cli(t, ['show', id]);
    expect(text.stdout).toMatch(/DAMAGED: its log has 1 region\(s\) that fail their checksum/);

    const ex = await cli(t, ['export', id, '--format', 'jsonl']);
    const rows = ex.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows.length).toBe(damage.readableRows);
    expect(rows.at(-1)._step).toBe(ROWS - 1);
    expect(ex.stderr).toMatch(/warning: run \S+: its log has 1 region\(s\) that fail their checksum/);

    const st = await cliJson(t, ['status']);
    expect(st.storeProblems).toEqual([expect.stringContaining(`run ${id}: 1 damaged region(s)`)]);
    expect(daemon.stderr()).toMatch(new RegExp(`store: run ${id}: .* has 1 region\\(s\\) that fail their checksum`));

    // Index gone, daemon restarted: the log is rebuilt from, never cut; the run stays finished.
    await killDaemon(t.dir);
    fs.rmSync(path.join(t.dataDir, 'index.db'));
    await startDaemon(t);
    const listed = await cliJson(t, ['runs']);
    expect(listed.find((x: { id: string }) => x.id === id)).toMatchObject({ state: 'finished' });
    expect(fs.statSync(file).size).toBe(size);
    expect(fs.readdirSync(path.dirname(file))).toEqual(['records.log']);
    expect((await exportJsonl(t, id)).length).toBe(damage.readableRows);
    expect((await cliJson(t, ['status'])).storeProblems).toHaveLength(1);
  });
});
