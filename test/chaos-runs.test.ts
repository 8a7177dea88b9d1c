// Chaos on a shared run: kill -9 of a child that holds the run, and of the
// owner while a child holds it. The run's state is right within 5 s, what
// was acknowledged is kept, nobody hangs, and another run is untouched.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, cliJson, exportJsonl, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

function setup(env: TestEnv) {
  const child = script(env, 'child.mjs', `
    const run = await logd.attach(process.argv[2]);
    process.stdout.on('error', () => {}); // its stdout goes to the owner: once the owner is killed, it logs on regardless
    let step = 0;
    for (;;) {
      for (let i = 0; i < 100; i++, step++) run.log({ child: step }, { step });
      if (await run.flush(3000)) console.log('acked ' + step);
      else console.log('unacked ' + step + ' ' + run.problem);
      if (step >= 1_000_000) break;
    }
  `);
  const owner = script(env, 'owner.mjs', `
    import { spawn } from 'node:child_process';
    import fs from 'node:fs';
    const run = await logd.init({ project: 'shared-chaos', name: 'owner' });
    for (let s = 0; s < 500; s++) run.log({ owner: s }, { step: s });
    await run.flush();
    const c = spawn(process.execPath, [${JSON.stringify(child)}, run.handle()], { stdio: ['ignore', 'pipe', 'inherit'] });
    c.stdout.on('data', (d) => process.stdout.write(d.toString().split('\\n').filter(Boolean).map((l) => 'child ' + l + '\\n').join('')));
    console.log('run ' + run.id + ' child ' + c.pid);
    while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 20));
    const t0 = Date.now();
    const res = await run.finish({ timeoutMs: 20000 });
    console.log('finished ' + JSON.stringify({ ...res, ms: Date.now() - t0 }));
  `);
  const bystander = script(env, 'bystander.mjs', `
    const run = await logd.init({ project: 'shared-chaos', name: 'bystander' });
    for (let s = 0; s < 3000; s++) { run.log({ b: s }, { step: s }); if (s % 300 === 0) await new Promise((r) => setTimeout(r, 50)); }
    const res = await run.finish();
    console.log('done ' + run.id + ' ' + res.state);
  `);
  return { owner, bystander };
}

const acked = (lines: string[]) => Math.max(0, ...lines.filter((l) => l.startsWith('child acked ')).map((l) => Number(l.slice(12))));

describe('kill -9 on a shared run', () => {
  it('of a child holding it: the child is detached within 5 s, its acknowledged rows kept, the owner finishes at once', async () => {
    t = makeEnv();
    const { owner, bystander } = setup(t);
    const go = `${t.dir}/go`;
    const o = spawnScript(t, owner, [go]);
    const b = spawnScript(t, bystander);
    await waitUntil(() => acked(o.lines) >= 1000, 30_000, 'the child to get acks');
    const [, id, , childPid] = o.lines.find((l) => l.startsWith('run '))!.split(' ');
    process.kill(Number(childPid), 'SIGKILL');
    const killedAt = Date.now();
    const lastAcked = acked(o.lines);
    await waitUntil(async () => {
      const info = await cliJson(t, ['show', id]);
      return info.metadata.writers.length === 2 && info.metadata.writers.every((w: { pid: number; attached: boolean }) => w.pid !== Number(childPid) || !w.attached);
    }, 5000, 'the dead child to be detached');
    expect(Date.now() - killedAt).toBeLessThan(5000);
    expect((await cliJson(t, ['show', id])).state).toBe('running'); // the owner is alive: a child's death does not end the run
    (await import('node:fs')).writeFileSync(go, '');
    await waitUntil(() => o.lines.some((l) => l.startsWith('finished ')), 30_000, 'the owner to finish');
    const res = JSON.parse(o.lines.find((l) => l.startsWith('finished '))!.slice(9));
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    expect(res.ms).toBeLessThan(5000); // it did not wait for the dead child
    const raw = await exportJsonl(t, id, ['--raw']);
    const childSteps = raw.filter((r) => 'child' in r).map((r) => r.child as number);
    expect(childSteps.length).toBeGreaterThanOrEqual(lastAcked);
    expect(childSteps).toEqual(childSteps.map((_, i) => i)); // 0..n-1, once each, in order
    expect(raw.filter((r) => 'owner' in r)).toHaveLength(500);
    await waitUntil(() => b.lines.some((l) => l.startsWith('done ')), 30_000, 'the bystander to finish');
    const [, bid, bstate] = b.lines.find((l) => l.startsWith('done '))!.split(' ');
    expect(bstate).toBe('finished');
    const brows = await exportJsonl(t, bid);
    expect(brows.map((r) => r.b)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });

  it('of the owner while a child holds it: crashed within 5 s, acknowledged rows kept, later rows of the still-logging child refused', async () => {
    t = makeEnv();
    const { owner, bystander } = setup(t);
    const o = spawnScript(t, owner, [`${t.dir}/never`]);
    const b = spawnScript(t, bystander);
    await waitUntil(() => acked(o.lines) >= 1000, 30_000, 'the child to get acks');
    const [, id, , childPid] = o.lines.find((l) => l.startsWith('run '))!.split(' ');
    o.kill('SIGKILL');
    const killedAt = Date.now();
    await waitUntil(async () => (await cliJson(t, ['show', id])).state === 'crashed', 5000, 'the run to be crashed');
    expect(Date.now() - killedAt).toBeLessThan(5000);
    const info = await cliJson(t, ['show', id]);
    expect(info.stateReason).toMatch(/^its process \d+ .* without calling finish\(\)$/);
    // The orphaned child keeps logging on its own; the daemon refuses it now that the run is final.
    const { alive } = await import('./helpers.js');
    const lastAcked = acked(o.lines);
    const raw = await exportJsonl(t, id, ['--raw']);
    const childSteps = raw.filter((r) => 'child' in r).map((r) => r.child as number);
    expect(childSteps.length).toBeGreaterThanOrEqual(lastAcked);
    expect(childSteps).toEqual(childSteps.map((_, i) => i));
    expect(raw.filter((r) => 'owner' in r)).toHaveLength(500);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await exportJsonl(t, id, ['--raw'])).length).toBe(raw.length); // nothing stored after the final state
    if (alive(Number(childPid))) process.kill(Number(childPid), 'SIGKILL');
    await waitUntil(() => b.lines.some((l) => l.startsWith('done ')), 30_000, 'the bystander to finish');
    const [, bid, bstate] = b.lines.find((l) => l.startsWith('done '))!.split(' ');
    expect(bstate).toBe('finished');
    expect((await exportJsonl(t, bid)).map((r) => r.b)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });
});
