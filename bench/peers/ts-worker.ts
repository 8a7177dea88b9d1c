// The TypeScript side of the peer benchmark: the same workloads as
// workload.py, through logd's TypeScript client. Prints one JSON line.
const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i].replace(/^--/, ''), process.argv[i + 1]);
const work = args.get('work') ?? 'empty';
const steps = Number(args.get('steps') ?? 100);
const floats = Number(args.get('floats') ?? 10);

const metrics = (step: number) => Object.fromEntries(Array.from({ length: floats }, (_, j) => [`m${j}`, step * 0.001 + j]));

async function main(): Promise<void> {
  const out: Record<string, unknown> = {};
  const t0 = performance.now();
  // As users load it: `import 'logd'`, the bundled client (dist/client/logd.js).
  const logd = await import('logd');
  out.import_ms = performance.now() - t0;
  const t1 = performance.now();
  const run = await logd.init({ project: 'peers', name: args.get('name') ?? 'peers', group: args.get('group') || undefined });
  out.init_ms = performance.now() - t1;
  out.run_id = run.id;
  // --steps 0 (paced until killed) still needs rows to cycle through.
  const rows = Array.from({ length: steps > 0 ? Math.min(steps, 1000) : 1000 }, (_, i) => metrics(i));
  if (work === 'steps') {
    for (let i = 0; i < steps; i++) run.log(rows[i % rows.length], { step: i });
  } else if (work === 'logcost') {
    const warm = Math.min(1000, Math.floor(steps / 10));
    for (let i = 0; i < warm; i++) run.log(rows[i % rows.length], { step: i });
    // Node runs the client's encoding and sending on the calling thread too,
    // so the process's CPU over the loop and the flush is what training pays.
    const c0 = process.cpuUsage();
    const w0 = performance.now();
    for (let i = warm; i < warm + steps; i++) run.log(rows[i % rows.length], { step: i });
    const wall = performance.now() - w0;
    await run.flush(120_000);
    const c = process.cpuUsage(c0);
    out.cpu_us_per_log = (c.user + c.system) / steps;
    out.wall_us_per_log = (wall * 1000) / steps;
    out.rows = warm + steps;
  } else if (work === 'paced') {
    // 100 rows every 10 ms, saying how far it got (kill and SIGTERM tests); --steps 0: until killed.
    for (let i = 0; steps === 0 || i < steps; ) {
      for (let j = 0; j < 100; j++, i++) run.log(rows[i % rows.length], { step: i });
      console.log(JSON.stringify({ logged: i }));
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  const t2 = performance.now();
  await run.finish();
  out.finish_ms = performance.now() - t2;
  out.process_ms = performance.now(); // since the process started
  console.log(JSON.stringify(out));
}

void main();
