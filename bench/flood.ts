// A flooding client, for the daemon-memory benchmark (bench/memory.ts) and
// its test: one process opens STREAMS write streams (one run each) on one
// connection and writes BATCHES record batches into each, back to back,
// without waiting for acknowledgements, the way a client that ignores flow
// control would. It then waits until every batch is acknowledged (durable),
// finishes the runs and prints one JSON line.
//
//   node dist/bench/flood.js STREAMS BATCHES ROWS_PER_BATCH   (LOGD_SERVICE names the daemon)
import { connectionFor } from '../client/connection.js';
import { parseServiceAddress, type RunInfo } from '../src/wire.js';

const [streams, batches, rows] = process.argv.slice(2).map(Number);
const KEYS = 10;
const deadlineMs = 10 * 60_000;

function batchTemplate(): { steps: Buffer; times: Buffer; counts: Buffer; keyIds: Buffer; values: Buffer } {
  const steps = new Float64Array(rows).map((_, i) => i);
  const times = new Float64Array(rows).fill(Date.now() / 1000);
  const counts = new Uint32Array(rows).fill(KEYS);
  const keyIds = new Uint32Array(rows * KEYS).map((_, i) => i % KEYS);
  const values = new Float64Array(rows * KEYS).map(() => Math.random());
  const b = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  return { steps: b(steps), times: b(times), counts: b(counts), keyIds: b(keyIds), values: b(values) };
}

async function oneStream(i: number): Promise<void> {
  const conn = connectionFor(parseServiceAddress(process.env.LOGD_SERVICE!));
  const info = await conn.unary<unknown, RunInfo>('createRun', {
    client: { pid: process.pid, host: 'flood', clientVersion: 'bench' }, project: 'flood', name: `s${i}`, group: '', jobType: '',
    configJson: '{}', tags: [], id: '', mode: 'offline', notes: '', sampleIntervalMs: 0,
  }, 60_000);
  const call = conn.write();
  const t = batchTemplate();
  const keys = Array.from({ length: KEYS }, (_, k) => `m${k}`);
  const acked = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stream ${i}: not every batch acknowledged within ${deadlineMs} ms`)), deadlineMs);
    call.on('data', (m: { ack?: { seq: number | string }; control?: { message: string } }) => {
      if (m.control) reject(new Error(`stream ${i}: ${m.control.message}`));
      if (m.ack && Number(m.ack.seq) >= batches) {
        clearTimeout(timer);
        resolve();
      }
    });
    call.on('error', (e: Error) => reject(e));
  });
  call.write({ open: { runId: info.id, runToken: info.runToken, writerId: info.ownerWriterId, keys: [] } });
  for (let seq = 1; seq <= batches; seq++) {
    call.write({ batch: { seq, newKeys: seq === 1 ? keys : [], newKeysFirst: 0, rows, ...t, summaryJson: [], configJson: [] } });
  }
  await acked;
  call.end();
  await conn.unary('finishRun', { runId: info.id, runToken: info.runToken, writerId: info.ownerWriterId, exitCode: 0, timeoutMs: 60_000, lastSeq: batches }, 120_000);
}

const t0 = Date.now();
await Promise.all(Array.from({ length: streams }, (_, i) => oneStream(i)));
console.log(JSON.stringify({ streams, batches, rows, seconds: (Date.now() - t0) / 1000 }));
process.exit(0);
