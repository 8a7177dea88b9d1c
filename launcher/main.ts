// `logd launch` as a standalone entry: node dist/launcher/main.js
//   --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P --grace-ms G --group NAME] script [args...]
// The main CLI can mount the same command with registerLaunchCommand(program).
import { Command, InvalidArgumentError } from 'commander';
import { pathToFileURL } from 'node:url';
import { launch, type LaunchOptions } from './launch.js';

function int(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected an integer, got '${value}'`);
  return n;
}

/** Adds `launch` to `program`; `ensureDaemon` is what the client's setup() provides. */
export function registerLaunchCommand(program: Command, ensureDaemon?: LaunchOptions['ensureDaemon']): Command {
  // Script arguments must reach the script untouched (`launch -- train.js --lr 1`
  // or `launch train.js --lr 1`), which commander only allows with positional options.
  program.enablePositionalOptions();
  return program
    .command('launch')
    .description('start N ranks of a data-parallel job with torchrun-compatible environment variables')
    .requiredOption('--nproc-per-node <n>', 'ranks on this node', int)
    .option('--nnodes <m>', 'nodes in the job', int, 1)
    .option('--node-rank <r>', 'this node (0..nnodes-1)', int, 0)
    .option('--master-addr <addr>', 'rendezvous host (rank 0 node)', '127.0.0.1')
    .option('--master-port <port>', 'rendezvous port', int, 29500)
    .option('--grace-ms <ms>', 'SIGTERM -> SIGKILL grace when stopping ranks', int, 5000)
    .option('--group <name>', "the group of the job's runs, given to every rank as LOGD_GROUP (default: the script's name and the start time)")
    .argument('<script>', '.js/.mjs runs with this node; anything else is executed')
    .argument('[args...]', 'arguments for the script')
    .passThroughOptions()
    .action(async (script: string, args: string[], o: Record<string, any>) => {
      let code: number;
      try {
        code = await launch({
          nprocPerNode: o.nprocPerNode,
          nnodes: o.nnodes,
          nodeRank: o.nodeRank,
          masterAddr: o.masterAddr,
          masterPort: o.masterPort,
          graceMs: o.graceMs,
          group: o.group,
          script,
          args,
          ensureDaemon,
        });
      } catch (err) {
        process.stderr.write(`${(err as Error).message}\n`);
        code = 2;
      }
      process.exitCode = code;
    });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const program = new Command('logd');
  registerLaunchCommand(program);
  await program.parseAsync(['node', 'logd', 'launch', ...process.argv.slice(2)]);
}
