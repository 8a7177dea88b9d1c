// Code and environment on the run (issue 38, item 8): a trainer in a git work
// tree, from TypeScript and from Python (with torch imported), records its
// commit, branch, dirty flag and remote, its command line and versions,
// gathered after init() off the training path; secrets are cut out of the
// command line and the remote; `logd show` and --json show it; save_code
// off records nothing. A dirty tree's diff (cut at 256 KiB) and the installed
// packages are the run's text items `logd/code.diff` and `logd/packages`.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, cli, cliJson, CLIENT, type TestEnv } from './helpers.js';
import { PYTHON, torchMissing, pyEnv } from './python/py-helpers.js';
import { redactArgv, redactUrl, checkEnvironment, describeEnvironment, splitEnvironment, DIFF_KEY, PACKAGES_KEY } from '../src/environment.js';
import { gitDiff } from '../daemon/code/git.js';

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
  // The TypeScript trainer's own package.json, with one dependency installed and one not.
  fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'model', dependencies: { 'tiny-dep': '^1.0.0', 'not-installed': '*' } }));
  fs.mkdirSync(path.join(repo, 'node_modules', 'tiny-dep'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'node_modules', 'tiny-dep', 'package.json'), JSON.stringify({ name: 'tiny-dep', version: '1.2.3' }));
  fs.writeFileSync(path.join(repo, '.git', 'info', 'exclude'), 'package.json\nnode_modules/\n');
});

/** The text items of a run under `key`, through `logd media --json`. */
async function texts(id: string, key: string): Promise<string[]> {
  const r = await cli(t, ['media', id, '--key', key, '--json']);
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).text as string);
}
afterAll(async () => t?.cleanup());

describe('the rules', () => {
  it('secrets are cut out of a command line and a URL; the daemon checks size and shape', () => {
    expect(redactArgv(['train.py', '--api-key', 'abc', '--token=xyz', '--lr', '0.1', 'postgres://u:pw@h/db'])).toEqual(['train.py', '--api-key', '***', '--token=***', '--lr', '0.1', 'postgres://u:***@h/db']);
    expect(redactUrl('https://dev:pw@git.example.com/x.git')).toBe('https://dev:***@git.example.com/x.git');
    expect(() => checkEnvironment('[1]')).toThrow(/JSON object/);
    expect(() => checkEnvironment(JSON.stringify({ x: 'y'.repeat(20_000) }))).toThrow(/at most 16384/);
    expect(checkEnvironment(JSON.stringify({ command: ['a', '--password', 'p'] })).command).toEqual(['a', '--password', '***']);
    expect(describeEnvironment({ git: { commit: 'abcdef1234567890', branch: 'main', dirty: true, changed: 1 } })).toEqual([['code', 'git abcdef123456 on main, dirty (1 file changed)']]);
    // The package list may be long (up to 512 KiB with it); the rest of the environment stays within 16 KiB.
    const pk = Array.from({ length: 3000 }, (_, i) => `package-number-${i}==1.0.${i}`);
    expect(checkEnvironment(JSON.stringify({ cwd: '/x', packages: pk })).packages).toHaveLength(3000);
    expect(() => checkEnvironment(JSON.stringify({ packages: ['a==1\nb==2'] }))).toThrow(/packages must be a list/);
    expect(() => checkEnvironment(JSON.stringify({ packages: pk, x: 'y'.repeat(20_000) }))).toThrow(/without its package list; at most 16384/);
    const split = splitEnvironment({ cwd: '/x', packages: ['b==2', 'A==1'], git: { commit: 'c', dirty: true, diff: '+x\n', diffBytes: 3, diffCut: false } });
    expect(split.kept).toEqual({ cwd: '/x', packagesCount: 2, git: { commit: 'c', dirty: true, diffBytes: 3, diffCut: false } });
    expect(split.texts).toEqual([[PACKAGES_KEY, 'A==1\nb==2\n'], [DIFF_KEY, '+x\n']]);
  });

  it('a dirty tree\'s diff is cut at a line\'s end past its bound, and says its whole size', async () => {
    const dir = path.join(t.dir, 'big');
    fs.mkdirSync(dir);
    const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
    git('init', '-q');
    fs.writeFileSync(path.join(dir, 'a.txt'), 'old\n');
    git('add', 'a.txt');
    git('-c', 'user.email=d@e', '-c', 'user.name=d', 'commit', '-q', '-m', 'x');
    fs.writeFileSync(path.join(dir, 'a.txt'), Array.from({ length: 5000 }, (_, i) => `line ${i}`).join('\n') + '\n');
    const whole = git('diff', 'HEAD');
    const d = (await gitDiff(dir, 1000))!;
    expect(d.bytes).toBe(Buffer.byteLength(whole));
    expect(d.cut).toBe(true);
    expect(Buffer.byteLength(d.diff)).toBeLessThanOrEqual(1000);
    expect(d.diff.endsWith('\n')).toBe(true);
    expect(whole.startsWith(d.diff)).toBe(true);
    const all = (await gitDiff(dir))!;
    expect(all).toEqual({ diff: whole, bytes: Buffer.byteLength(whole), cut: false });
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
    expect(text).toMatch(new RegExp(`code: git ${head.slice(0, 12)} on main, dirty \\(1 file changed; its diff \\d+ bytes in logd/code\\.diff\\)`));
    expect(text).toMatch(/command: .*train\.mjs on --api-key '\*\*\*'|command: .*train\.mjs on --api-key \*\*\*/);
    // The dirty tree's diff and the program's packages, as the run's text items (not in its metadata).
    expect(await texts(id, DIFF_KEY)).toEqual([execFileSync('git', ['diff', 'HEAD'], { cwd: repo, encoding: 'utf8' })]);
    expect(await texts(id, PACKAGES_KEY)).toEqual(['not-installed==?\ntiny-dep==1.2.3\n']);
    expect(env.packagesCount).toBe(2);
    expect(env.git.diffBytes).toBeGreaterThan(0);
    expect(JSON.stringify(env)).not.toContain('+v2');
    expect(text).toContain(`packages: 2 installed, listed in ${PACKAGES_KEY}`);
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
    // pip freeze's list (and pip's own), as a text item; the diff as for TypeScript.
    const [pk] = await texts(id, PACKAGES_KEY);
    expect(pk).toContain(`torch==${torchVersion.split('+')[0]}`);
    expect(pk.split('\n').filter(Boolean).length).toBe(env.packagesCount);
    expect(await texts(id, DIFF_KEY)).toHaveLength(1);
    // LOGD_SAVE_PACKAGES=0 and LOGD_SAVE_DIFF=0: neither kept.
    const bare = await execa(PYTHON, [py, 'on'], { cwd: repo, env: { ...pyEnv(t), LOGD_SAVE_PACKAGES: '0', LOGD_SAVE_DIFF: '0' }, extendEnv: false, reject: false, timeout: 120_000 });
    const bareId = bare.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const bareEnv = (await cliJson(t, ['show', bareId])).metadata.environment;
    expect(bareEnv.git).toMatchObject({ commit: head, dirty: true });
    expect(bareEnv.git.diffBytes).toBeUndefined();
    expect(bareEnv.packagesCount).toBeUndefined();
    expect(await texts(bareId, PACKAGES_KEY)).toEqual([]);
    const off = await execa(PYTHON, [py, 'off'], { cwd: repo, env: pyEnv(t), extendEnv: false, reject: false, timeout: 120_000 });
    const offId = off.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    expect((await cliJson(t, ['show', offId])).metadata.environment).toBeUndefined();
  });
});
