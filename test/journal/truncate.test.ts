// Issue 32 item 6: truncating a live writer's crash journal must not kill the
// trainer. Before: its next store into the mapping, past the file's new end,
// was a SIGBUS (exit 135 within 0.5 s). Now the addon's handler puts memory in
// place of the lost pages, the writer gives the journal up, says so once, and
// every row still reaches the store. Real processes: a daemon, a trainer, and
// `truncate -s 0` of its journal while it logs.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, startDaemon, waitUntil, exportJsonl, cliJson, type TestEnv } from '../helpers.js';
import { addonUnavailable } from '../../dist/addon/index.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const journals = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.journal')) : []);

describe.skipIf(addonUnavailable() !== null)(`issue 32 item 6: a journal truncated under its writer${addonUnavailable() ? ` (skipped: ${addonUnavailable()})` : ''}`, () => {
  for (const size of ['0', '64K']) {
    it(`truncate -s ${size} of a live writer's journal: the trainer lives, says once that the journal is lost, and every row is stored`, async () => {
      t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_SAMPLE_INTERVAL_MS: '0' });
      await startDaemon(t);
      const go = path.join(t.dir, 'go');
      const w = spawnScript(t, script(t, 'trainer.mjs', `
        import fs from 'node:fs';
        const run = await logd.init({ project: 'trunc' });
        console.log('run ' + run.id);
        let step = 0;
        const log = (n) => { for (let i = 0; i < n; i++, step++) run.log({ loss: 1 / (step + 1), acc: step * 1e-4, ['k' + (step % 50)]: step }, { step }); };
        log(2000);
        await run.flush();
        console.log('logged ' + step);
        while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 10));
        for (let b = 0; b < 20; b++) {
          log(1000); // stores into the journal's pages, now past the file's end
          await new Promise((r) => setTimeout(r, 20));
        }
        const res = await run.finish();
        console.log('done ' + step + ' ' + res.state);
      `));
      await waitUntil(() => w.lines.some((l) => l.startsWith('logged ')), 30_000, 'the trainer to log its first rows');
      const id = w.lines.find((l) => l.startsWith('run '))!.slice(4);
      const spool = path.join(t.dataDir, 'spool');
      const [file] = journals(spool).filter((f) => f.startsWith(id));
      expect(file, `a journal of run ${id} in ${spool}`).toBeDefined();
      execFileSync('truncate', ['-s', size, path.join(spool, file)]);
      let err = '';
      w.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      fs.writeFileSync(go, '');
      const [code, signal] = await w.closed;
      expect({ code, signal }, err).toEqual({ code: 0, signal: null });
      expect(w.lines).toContain('done 22000 finished');
      expect(err.match(/crash journal lost: .*was truncated by another process/g) ?? [], err).toHaveLength(1);
      const rows = await exportJsonl(t, id, ['--keys', 'loss']);
      expect(rows.map((r) => r._step)).toEqual(Array.from({ length: 22000 }, (_, i) => i));
      expect((await cliJson(t, ['show', id])).state).toBe('finished');
    }, 90_000);
  }
});
