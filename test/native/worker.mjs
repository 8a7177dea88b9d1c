// One rank of a native test scenario. Usage:
//   node worker.mjs <scenario> <rank> <worldSize> <initMethod> [timeoutMs]
// Prints exactly one `RESULT <json>` line on stdout; exits non-zero on failure.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import * as native from '../../dist/native/index.js';

const [scenario, rankArg, worldArg, initMethod, timeoutArg] = process.argv.slice(2);
const rank = Number(rankArg);
const worldSize = Number(worldArg);
const timeoutMs = Number(timeoutArg ?? 10000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const result = (obj) => process.stdout.write(`RESULT ${JSON.stringify(obj)}\n`);
const errInfo = (e) => ({ name: e?.name, message: e?.message, isNative: e instanceof native.LogdNativeError });

async function settle(p) {
  const t0 = performance.now();
  try {
    await p;
    return { ok: true, ms: performance.now() - t0 };
  } catch (e) {
    return { ok: false, ms: performance.now() - t0, ...errInfo(e) };
  }
}

const scenarios = {
  async ops(pg) {
    const out = {};
    for (const op of ['sum', 'avg', 'min', 'max', 'product']) {
      for (const [type, Ctor] of [['f32', Float32Array], ['f64', Float64Array], ['i32', Int32Array]]) {
        const t = new Ctor([rank + 1, 2 * (rank + 1), 10 - rank]);
        await pg.allReduce(t, op);
        out[`${op}:${type}`] = Array.from(t);
      }
    }
    const b = new Float64Array([rank * 100 + 0.5, rank]);
    await pg.broadcast(b, worldSize - 1);
    out.broadcast = Array.from(b);
    const gathered = new Int32Array(2 * worldSize);
    await pg.allGather(gathered, new Int32Array([rank, rank * rank]));
    out.allGather = Array.from(gathered);
    // Sub-array views: only the view's elements may change.
    const whole = new Float32Array([-1, -1, rank + 1, rank + 2, -1]);
    await pg.allReduce(whole.subarray(2, 4), 'sum');
    out.view = Array.from(whole);
    // Several collectives in flight at once complete in call order with the right data.
    const many = Array.from({ length: 8 }, (_, i) => new Float64Array([i + rank]));
    const order = [];
    await Promise.all(many.map((t, i) => pg.allReduce(t, 'sum').then(() => order.push(i))));
    out.inflight = many.map((t) => t[0]);
    out.inflightOrder = order;
    // A large op followed by small ones: gloo may finish the small ones first,
    // but promises must still settle in call order.
    const mixed = [new Float32Array(1 << 20).fill(1), ...Array.from({ length: 4 }, () => new Float32Array([1]))];
    const mixedOrder = [];
    await Promise.all(mixed.map((t, i) => pg.allReduce(t, 'sum').then(() => mixedOrder.push(i))));
    out.mixedOrder = mixedOrder;
    out.mixedValues = [mixed[0][0], mixed[0][(1 << 20) - 1], mixed[4][0]];
    await pg.barrier();
    out.badGather = await settle(pg.allGather(new Int32Array(2 * worldSize + 1), new Int32Array([1, 2])));
    out.badType = await settle(pg.allGather(new Float32Array(worldSize), new Int32Array([1])));
    out.badTensor = await settle(pg.allReduce(new Uint8Array(4), 'sum'));
    out.badOp = await settle(pg.allReduce(new Float32Array(1), 'median'));
    out.reduceScatter = await settle(pg.reduceScatter(new Float32Array(1), new Float32Array(worldSize), 'sum'));
    await pg.destroy();
    out.afterDestroy = await settle(pg.barrier());
    return out;
  },
  // Rank 0 waits in a barrier for ~1.5 s while rank 1 dawdles; timers and the
  // libuv pool (fs) must keep working in the meantime.
  async eventloop(pg) {
    if (rank !== 0) {
      await sleep(1500);
      await pg.barrier();
      await pg.destroy();
      return {};
    }
    let ticks = 0;
    let maxGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ticks++;
    }, 10);
    const barrier = pg.barrier().then(() => performance.now());
    const t0 = performance.now();
    // More fs reads than libuv has threads, while the barrier is waiting.
    const self = fileURLToPath(import.meta.url);
    const fsDone = await Promise.all(Array.from({ length: 16 }, () => readFile(self).then(() => performance.now() - t0)));
    const barrierDone = (await barrier) - t0;
    clearInterval(timer);
    await pg.destroy();
    return { ticks, maxGap, fsMaxMs: Math.max(...fsDone), barrierMs: barrierDone };
  },
  // The last rank prints READY and then never joins; the harness SIGKILLs it.
  async killed(pg) {
    if (rank === worldSize - 1) {
      process.stdout.write('READY\n');
      await sleep(60_000);
      return {};
    }
    const r = await settle(pg.allReduce(new Float32Array(1024), 'sum'));
    // destroy() after a dead peer must resolve, and must not stall the loop meanwhile.
    let maxGap = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      maxGap = Math.max(maxGap, performance.now() - last);
      last = performance.now();
    }, 10);
    const destroyed = await settle(pg.destroy());
    clearInterval(timer);
    return { ...r, destroyed, destroyMaxGap: maxGap };
  },
  // Different lengths on different ranks: must reject, not hang or corrupt.
  // Then different reduce ops, then different collectives; afterwards the
  // group must still work.
  async mismatch(pg) {
    const sizes = await settle(pg.allReduce(new Float32Array(rank === 0 ? 4 : 8), 'sum'));
    const ops = await settle(pg.allReduce(new Float32Array(4), rank === 0 ? 'sum' : 'max'));
    const kinds = await settle(rank === 0 ? pg.barrier() : pg.broadcast(new Int32Array(2), 0));
    const after = new Float64Array([rank + 1]);
    await pg.allReduce(after, 'sum');
    await pg.destroy();
    return { ...sizes, ops, kinds, after: after[0] };
  },
};

const t0 = performance.now();
let pg;
try {
  pg = await native.initProcessGroup({ backend: process.env.LOGD_TEST_BACKEND ?? 'gloo', rank, worldSize, initMethod, timeoutMs, localRank: rank });
} catch (e) {
  result({ init: 'failed', ms: performance.now() - t0, ...errInfo(e) });
  process.exit(3);
}
result(await scenarios[scenario](pg));
process.exit(0);
