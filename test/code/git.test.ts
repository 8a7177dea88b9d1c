// The daemon's reader of a trainer's working directory (daemon/code/git.ts), with real git: the facts of a
// dirty work tree, one read for many runs started in the same directory, another user's directory not read,
// a directory outside any work tree, and the porcelain it parses.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitReader, parseStatus } from '../../daemon/code/git.js';

let dir = '';
let repo = '';
let head = '';
const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-code-'));
  repo = path.join(dir, 'repo');
  fs.mkdirSync(path.join(repo, 'sub'), { recursive: true });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'dev@example.com');
  git('config', 'user.name', 'dev');
  for (const f of ['a.txt', 'b.txt', 'sub/c.txt']) fs.writeFileSync(path.join(repo, f), 'v1\n');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  git('remote', 'add', 'origin', 'https://dev:pw123@git.example.com/team/model.git');
  head = git('rev-parse', 'HEAD');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('GitReader', () => {
  it('reads commit, branch, dirty and how many files changed, the remote without its password, the root; from a subdirectory too', async () => {
    fs.writeFileSync(path.join(repo, 'a.txt'), 'v2\n');
    fs.writeFileSync(path.join(repo, 'sub/c.txt'), 'v2\n');
    fs.writeFileSync(path.join(repo, 'untracked.txt'), 'x\n'); // untracked files do not make it dirty
    const r = new GitReader();
    const facts = await r.facts(path.join(repo, 'sub'));
    // The diff of the whole work tree (tracked files), whichever subdirectory the trainer ran in.
    const diff = git('diff', 'HEAD') + '\n';
    expect(facts).toEqual({
      commit: head, branch: 'main', dirty: true, changed: 2, remote: 'https://dev:***@git.example.com/team/model.git', root: fs.realpathSync(repo),
      diff, diffBytes: Buffer.byteLength(diff), diffCut: false,
    });
    expect(diff).toContain('+++ b/sub/c.txt');
    expect(diff).not.toContain('untracked');
    // Without the diff (LOGD_SAVE_DIFF=0): the same facts, no diff read.
    expect(await new GitReader().facts(path.join(repo, 'sub'), false)).toEqual({ commit: head, branch: 'main', dirty: true, changed: 2, remote: 'https://dev:***@git.example.com/team/model.git', root: fs.realpathSync(repo) });
    git('checkout', '-q', '.');
    const clean = await new GitReader().facts(repo);
    expect(clean).toMatchObject({ commit: head, dirty: false });
    expect(clean).not.toHaveProperty('changed');
    git('checkout', '-q', '--detach');
    expect(await new GitReader().facts(repo)).toMatchObject({ commit: head, branch: null });
    git('checkout', '-q', 'main');
  });

  it('one read serves every run started in the directory within the cache time; a later run reads again', async () => {
    const r = new GitReader(300);
    const all = await Promise.all(Array.from({ length: 50 }, () => r.facts(repo)));
    expect(r.reads).toBe(1);
    expect(new Set(all.map((f) => f?.commit))).toEqual(new Set([head]));
    await new Promise((res) => setTimeout(res, 350));
    await r.facts(repo);
    expect(r.reads).toBe(2);
  });

  it('outside a work tree: null; a path that is not absolute or does not exist: why it was not read', async () => {
    const plain = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-plain-'));
    try {
      // GIT_CEILING_DIRECTORIES is not needed: /tmp is not inside a work tree on a CI machine, and if it were the answer would name it.
      const f = await new GitReader().facts(plain);
      if (f !== null) expect(f.root).not.toBe(plain);
    } finally {
      fs.rmSync(plain, { recursive: true, force: true });
    }
    expect(await new GitReader().facts('relative/dir')).toEqual({ unread: 'the working directory is not an absolute path' });
    expect((await new GitReader().facts(path.join(dir, 'gone')))?.unread).toMatch(/cannot be read by the daemon \(ENOENT\)/);
  });

  it("another user's directory is not read (git is never run there)", async () => {
    if (process.getuid?.() !== 0) return void console.log('skipped: changing a directory\'s owner needs root');
    const theirs = path.join(dir, 'theirs');
    fs.cpSync(repo, theirs, { recursive: true });
    // A hostile config: were git run there, fsmonitor would run this command (it is off in the daemon's git anyway).
    const marker = path.join(dir, 'ran');
    fs.appendFileSync(path.join(theirs, '.git', 'config'), `[core]\n\tfsmonitor = touch ${marker}\n`);
    fs.chownSync(theirs, 65534, 65534);
    const r = new GitReader();
    const f = await r.facts(theirs);
    expect(f?.unread).toMatch(/belongs to uid 65534, not the daemon's user \(0\)/);
    expect(f).not.toHaveProperty('commit');
    // The daemon's own directory with that config: read, and fsmonitor not run.
    fs.chownSync(theirs, 0, 0);
    expect(await new GitReader().facts(theirs)).toMatchObject({ commit: head });
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('parses porcelain v2: the head, a detached head, a repository without a commit, the entries', () => {
    expect(parseStatus(`# branch.oid ${'a'.repeat(40)}\n# branch.head main\n1 .M N... 100644 100644 100644 x y a.txt\n2 R. N... 100644 100644 100644 x y R100 b\tc\n`))
      .toEqual({ commit: 'a'.repeat(40), branch: 'main', changed: 2 });
    expect(parseStatus('# branch.oid (initial)\n# branch.head main\n')).toEqual({ commit: null, branch: 'main', changed: 0 });
    expect(parseStatus(`# branch.oid ${'b'.repeat(40)}\n# branch.head (detached)\n`).branch).toBeNull();
  });
});
