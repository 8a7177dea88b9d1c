// Issue 23, item 1: the torchrun commands the docs give for Debian's torch
// (docs/api.md's Python section, python/README.md, examples/python/README.md) run
// exactly as written, from the repository root, after `make install` (its
// step, scripts/install-cli.sh, into a prefix of the test's own; `logd` on
// PATH is then the client's sidecar: no LOGD_BIN). The docs say why the
// flags and the interpreter are needed.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { ROOT, makeEnv, type TestEnv } from '../helpers.js';
import { torchMissing, pyEnv } from './py-helpers.js';

const DOCS = ['docs/api.md', 'python/README.md', 'examples/python/README.md'];
const read = (f: string) => fs.readFileSync(path.join(ROOT, f), 'utf8');

/** docs/api.md's Python section: from its heading to the next one of the same level. */
function pythonSection(): string {
  const text = read('docs/api.md');
  const from = text.indexOf('\n## Python client\n');
  return text.slice(from, text.indexOf('\n## ', from + 5));
}

/** Every torchrun command line of a document: in code blocks, and in `backticks` (tables). */
function torchrunCommands(text: string): string[] {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    for (const m of line.matchAll(/`([^`]*-m torch\.distributed\.run[^`]*)`/g)) out.add(m[1].trim());
    if (/^\S*python\S* -m torch\.distributed\.run /.test(line.trim())) out.add(line.trim());
  }
  return [...out];
}

describe('the docs on Debian\'s torch', () => {
  it('say how to make the venv and which torchrun flags are needed, in docs/api.md\'s Python section and python/README.md', () => {
    for (const text of [pythonSection(), read('python/README.md')]) {
      expect(text).toContain('/usr/bin/python3 -m venv --system-site-packages');
      expect(text).toContain('--redirects 1 --tee 1 --log_dir');
      expect(text).toContain("AttributeError: 'NoneType' object has no attribute 'get'");
      expect(torchrunCommands(text).length).toBeGreaterThan(0);
    }
    const all = DOCS.flatMap((f) => torchrunCommands(f === 'docs/api.md' ? pythonSection() : read(f)));
    for (const c of all) {
      expect(c, c).toMatch(/--redirects 1 --tee 1 --log_dir \S+/);
      expect(c, c).not.toContain('LOGD_BIN'); // `make install` is the set-up
      expect(c, c).toMatch(/^\.venv-python\/bin\/python /);
    }
    // The examples' own docstrings give the same commands.
    for (const f of ['rank0.py', 'group.py']) expect(read(`examples/python/${f}`)).toContain('--redirects 1 --tee 1 --log_dir /tmp/logd-torchrun');
  });
});

describe.skipIf(torchMissing !== null)(`the documented torchrun commands, run as written${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  let env: NodeJS.ProcessEnv;
  beforeEach(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const prefix = path.join(t.dir, 'prefix');
    const r = await execa('bash', [path.join(ROOT, 'scripts', 'install-cli.sh')], { env: { ...t.env, PREFIX: prefix }, reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    env = { ...pyEnv(t, { OMP_NUM_THREADS: '1' }), PATH: `${path.join(prefix, 'bin')}:${t.env.PATH}` };
    delete env.LOGD_BIN; // the sidecar is `logd` on PATH, as after `make install`
  });
  afterEach(async () => {
    await t.cleanup();
  });

  const sh = (cmd: string, timeout = 300_000) => execa('bash', ['-c', cmd], { cwd: ROOT, env, extendEnv: false, reject: false, all: true, timeout });

  const commands = [...new Set(DOCS.flatMap((f) => torchrunCommands(f === 'docs/api.md' ? pythonSection() : read(f))))];
  for (const cmd of commands) {
    it(cmd.replace(/^\.venv-python\/bin\/python -m torch\.distributed\.run .* examples\//, 'torchrun … examples/'), async () => {
      const r = await sh(cmd);
      expect(r.exitCode, r.all).toBe(0);
      const out = r.all ?? '';
      // What the example printed is itself a command that works as printed.
      const shown = /stored: (logd show \S+)/.exec(out);
      const grouped = /stored: (logd runs --group \S+)/.exec(out);
      expect(shown ?? grouped, out).not.toBeNull();
      if (shown) {
        const run = await sh(`${shown[1]} --json`, 30_000);
        expect(run.exitCode, run.all).toBe(0);
        expect(JSON.parse(run.stdout)).toMatchObject({ name: 'rank0', state: 'finished', historyRows: 30 });
      } else {
        const runs = await sh(`${grouped![1]} --json`, 30_000);
        expect(runs.exitCode, runs.all).toBe(0);
        const list = JSON.parse(runs.stdout) as Array<{ name: string; state: string; historyRows: number }>;
        expect(list.map((x) => [x.name, x.state, x.historyRows]).sort()).toEqual([0, 1, 2, 3].map((i) => [`rank${i}`, 'finished', 30]));
      }
    });
  }
});
