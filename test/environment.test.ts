// Code and environment on the run (issue 38, item 8): a trainer in a git work
// tree, from TypeScript and from Python (with torch imported), records its
// commit, branch, dirty flag and remote, its command line and versions,
// gathered after init() off the training path; secrets are cut out of the
// command line and the remote; `logd show` and --json show it; save_code
// off records nothing.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, cli, cliJson, CLIENT, type TestEnv } from './helpers.js';
import { PYTHON, torchMissing, pyEnv } from './python/py-helpers.js';
import { redactArgv, redactUrl, checkEnvironment, describeEnvironment } from '../src/environment.js';

let t: TestEnv;
let repo = '';
let head = '';
const SECRET = 's3cr3t-value';

beforeAll(() => {
  t = makeEnv();
  repo = path.join(t.dir, 'repo');
  fs.mkdirSync(repo);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'dev@example.com');
  git('config', 'user.name', 'dev');
  fs.writeFileSync(path.join(repo, 'train.txt'), 'v1\n');
  git('add', 'train.txt');
  git('commit', '-q', '-m', 'first');
  git('remote', 'add', 'origin', `https://dev:${SECRET}@git.example.com/team/model.git`);
  fs.writeFileSync(path.join(repo, 'train.txt'), 'v2\n'); // dirty
  head = git('rev-parse', 'HEAD');
});
afterAll(async () => t?.cleanup());

describe('the rules', () => {
  it('secrets are cut out of a command line and a URL; the daemon checks size and shape', () => {
    expect(redactArgv(['train.py', '--api-key', 'abc', '--token=xyz', '--lr', '0.1', 'postgres://u:pw@h/db'])).toEqual(['train.py', '--api-key', '***', '--token=***', '--lr', '0.1', 'postgres://u:***@h/db']);
    expect(redactUrl('https://dev:pw@git.example.com/x.git')).toBe('https://dev:***@git.example.com/x.git');
    expect(() => checkEnvironment('[1]')).toThrow(/JSON object/);
    expect(() => checkEnvironment(JSON.stringify({ x: 'y'.repeat(20_000) }))).toThrow(/at most 16384/);
    expect(checkEnvironment(JSON.stringify({ command: ['a', '--password', 'p'] })).command).toEqual(['a', '--password', '***']);
    expect(describeEnvironment({ git: { commit: 'abcdef1234567890', branch: 'main', dirty: true, changed: 1 } })).toEqual([['code', 'git abcdef123456 on main, dirty (1 file changed)']]);
  });
});

describe('a trainer records its code and environment', () => {
  it('TypeScript: commit, branch, dirty, remote without its password, the command line without its secret', async () => {
    const file = script(t, 'train.mjs', `
      const run = await logd.init({ project: 'env', name: 'ts', saveCode: process.argv[2] !== 'off' });
      run.log({ loss: 1 });
      await run.finish();
      console.log('run ' + run.id);
    `);
    const r = await execa(process.execPath, [file, 'on', '--api-key', SECRET], { cwd: repo, env: t.env, extendEnv: false, reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const shown = await cliJson(t, ['show', id]);
    const env = shown.metadata.environment;
    expect(env.git).toMatchObject({ commit: head, branch: 'main', dirty: true, changed: 1, remote: 'https://dev:***@git.example.com/team/model.git' });
    expect(env.command.slice(-3)).toEqual(['on', '--api-key', '***']);
    expect(JSON.stringify(shown)).not.toContain(SECRET);
    expect(env.runtime).toBe(`node ${process.versions.node}`);
    expect(env.cwd).toBe(repo);
    const text = (await cli(t, ['show', id])).stdout;
    expect(text).toContain(`code: git ${head.slice(0, 12)} on main, dirty (1 file changed)`);
    expect(text).toMatch(/command: .*train\.mjs on --api-key '\*\*\*'|command: .*train\.mjs on --api-key \*\*\*/);
    // Off: nothing recorded.
    const off = await execa(process.execPath, [file, 'off'], { cwd: repo, env: t.env, extendEnv: false, reject: false });
    const offId = off.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    expect((await cliJson(t, ['show', offId])).metadata.environment).toBeUndefined();
    expect(CLIENT).toBeTruthy();
  });

  it.skipIf(torchMissing !== null)('Python: the same, and torch\'s version when the program imported it; save_code=False records nothing', async () => {
    const py = path.join(t.dir, 'train.py');
    fs.writeFileSync(py, `
import sys, torch, logd
run = logd.init(project="env", name="py", save_code=sys.argv[1] != "off")
run.log({"loss": 1.0})
run.finish()
print("run " + run.id)
`);
    const r = await execa(PYTHON, [py, 'on', '--token', SECRET], { cwd: repo, env: pyEnv(t), extendEnv: false, reject: false, timeout: 120_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const env = (await cliJson(t, ['show', id])).metadata.environment;
    expect(env.git).toMatchObject({ commit: head, branch: 'main', dirty: true });
    expect(env.command.slice(-3)).toEqual(['on', '--token', '***']);
    expect(env.runtime).toMatch(/^python 3\./);
    const torchVersion = execFileSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8' }).trim();
    expect(env.torch.version).toBe(torchVersion);
    expect(env.client).toBe('python');
    const off = await execa(PYTHON, [py, 'off'], { cwd: repo, env: pyEnv(t), extendEnv: false, reject: false, timeout: 120_000 });
    const offId = off.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    expect((await cliJson(t, ['show', offId])).metadata.environment).toBeUndefined();
  });
});
