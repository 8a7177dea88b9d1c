// The logd demo (`make demo`): runs the four logging patterns one after the
// other as real processes against an auto-started daemon, then shows what was
// stored with the logd CLI and prints the commands to look further.
//
//   node dist/examples/demo.js
//
// Data goes to $LOGD_DIR when it is set, otherwise to ./.logd-demo in the
// repository, so the demo never writes into your real logd data dir.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { logdCommand, logdOnPathHint, waitForExit, runMain } from './common.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '..', '..');
const cli = path.join(repoRoot, 'dist', 'daemon', 'cli.js');
const STEP_DEADLINE_MS = 30_000;

interface Step {
  script: string;
  what: string;
  args: string[];
  /** Runs the step creates, to list exactly this demo's runs afterwards. */
  runs: number;
}

const steps: Step[] = [
  { script: 'rank0', what: 'one process: 4 ranks train, only rank 0 logs', args: ['--workers', '4', '--steps', '20', '--project', 'demo-rank0'], runs: 1 },
  { script: 'group', what: 'many processes: 4 ranks, a run each, one group', args: ['--workers', '4', '--steps', '20', '--project', 'demo-group'], runs: 4 },
  { script: 'pool', what: 'a pool of 2 forked workers runs 4 trials, a run each', args: ['--workers', '2', '--trials', '4', '--steps', '15', '--project', 'demo-pool'], runs: 4 },
  { script: 'shared', what: 'one run shared by a parent and 2 forked children', args: ['--workers', '2', '--steps', '20', '--project', 'demo-shared'], runs: 1 },
];

function fail(msg: string): never {
  console.error(`demo: FAILED: ${msg}`);
  process.exit(1);
}

/** Runs a command with its output indented under the demo's own lines; returns its exit code and stdout. */
async function runIndented(args: string[], what: string): Promise<{ code: number; stdout: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  const indent = (chunk: Buffer, to: NodeJS.WriteStream) => to.write(chunk.toString().replace(/^(?=.)/gm, '    '));
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    indent(c, process.stdout);
  });
  child.stderr.on('data', (c: Buffer) => indent(c, process.stderr));
  const code = await waitForExit(child, STEP_DEADLINE_MS, what);
  return { code, stdout };
}

/** A CLI query whose JSON answer the demo needs. */
async function cliJson<T>(args: string[]): Promise<T> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const code = await waitForExit(child, STEP_DEADLINE_MS, `logd ${args.join(' ')}`);
  if (code !== 0) fail(`\`logd ${args.join(' ')}\` exited with code ${code}`);
  return JSON.parse(out) as T;
}

async function main(): Promise<void> {
  const started = Date.now();
  if (!fs.existsSync(cli)) fail(`${cli} is missing; build first with \`make build\` (or \`npx tsc -p tsconfig.json\`)`);
  process.env.LOGD_DIR = path.resolve(process.env.LOGD_DIR || path.join(repoRoot, '.logd-demo'));
  if (process.env.LOGD_SERVICE) {
    // An inherited daemon address could point at a daemon of another data dir.
    console.log('demo: ignoring LOGD_SERVICE so that the daemon of the data dir below is used');
    delete process.env.LOGD_SERVICE;
  }
  console.log(`demo: logd data dir: ${process.env.LOGD_DIR} (set LOGD_DIR to use another)`);
  console.log('demo: the first example auto-starts a sidecar daemon for it; the others reuse it');

  for (const [i, s] of steps.entries()) {
    const label = `[${i + 1}/${steps.length}] ${s.script}`;
    console.log(`\ndemo: ${label}: ${s.what}`);
    const t0 = Date.now();
    const { code } = await runIndented([path.join(here, `${s.script}.js`), ...s.args], s.script);
    if (code !== 0) fail(`${label} exited with code ${code} (its output is above)`);
    console.log(`demo: ${label}: ok in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  const total = steps.reduce((n, s) => n + s.runs, 0);
  type RunRow = { id: string; project: string; state: string; historyRows: number };
  const runs = await cliJson<RunRow[]>(['runs', '--limit', String(total), '--json']);
  const unfinished = runs.filter((r) => r.state !== 'finished');
  if (runs.length !== total || unfinished.length > 0) {
    fail(`expected ${total} finished runs, the daemon lists ${runs.length}, of which not finished: ${unfinished.map((r) => `${r.id} (${r.state})`).join(', ') || 'none'}`);
  }
  const sharedRun = runs.find((r) => r.project === 'demo-shared');
  if (!sharedRun) fail('the shared run is not listed');

  console.log(`\ndemo: the ${total} runs this demo stored (\`logd runs --limit ${total}\`):`);
  if ((await runIndented([cli, 'runs', '--limit', String(total)], 'logd runs')).code !== 0) fail('`logd runs` failed');
  console.log(`\ndemo: the shared run, written by 3 processes (\`logd show ${sharedRun.id}\`):`);
  if ((await runIndented([cli, 'show', sharedRun.id], 'logd show')).code !== 0) fail('`logd show` failed');

  console.log(`\ndemo: all ${steps.length} patterns ran in ${((Date.now() - started) / 1000).toFixed(1)} s. Look further:`);
  for (const c of [
    'runs --project demo-group',
    'runs --project demo-pool --json',
    `export ${sharedRun.id} --raw`,
    `export ${sharedRun.id} --format csv`,
    'status',
  ]) console.log(`  ${logdCommand(c)}`);
  console.log('demo: the sidecar daemon exits by itself once idle; `logd stop` stops it now.');
  const hint = logdOnPathHint();
  if (hint) console.log(`demo: ${hint}`);
  // Last line on purpose: the one command that opens the dashboard on these runs.
  console.log(`\ndemo: see every run, group and GPU in the dashboard (it prints the URL to open):\n  ${logdCommand('ui')}`);
}

await runMain('demo: FAILED', main);
