// What the whole command line (program.ts) and `logd serve` run alone (serve.ts) share: the program's name and
// version, an integer flag's parser, and the way a command fails.
import { Command, InvalidArgumentError } from 'commander';
import { LOGD_VERSION } from '../../src/config.js';

/** The `logd` program, with no command yet. */
export function logdProgram(): Command {
  return new Command().name('logd').description('logd: the logging daemon for distributed training, and its command line').version(LOGD_VERSION);
}

export function intArg(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
    return n;
  };
}

export { fail } from './fail.js';
