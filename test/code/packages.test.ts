// The daemon's read of a TypeScript trainer's installed packages (daemon/code/packages.ts): versions as Node
// resolves them (a dependency hoisted to a parent's node_modules too), what a hostile or broken package.json
// can and cannot make it read, and another user's directory left unread.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { nodePackages, PackageReader } from '../../daemon/code/packages.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-packages-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const write = (rel: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), text);
};
const asRoot = process.getuid?.() === 0;
const nobody = asRoot && spawnSync('id', ['-u', 'nobody']).status === 0;

describe('the packages of a TypeScript trainer, as the daemon reads them', () => {
  it('the nearest package.json from the working directory up, each dependency as installed here or in a parent', async () => {
    write('ws/package.json', JSON.stringify({ dependencies: { hoisted: '^2' } }));
    write('ws/node_modules/hoisted/package.json', JSON.stringify({ version: '2.0.1' }));
    write('ws/app/package.json', JSON.stringify({ dependencies: { local: '1', hoisted: '2', '@scope/x': '3' }, devDependencies: { local: '1', missing: '9' } }));
    write('ws/app/node_modules/local/package.json', JSON.stringify({ version: '1.4.0' }));
    write('ws/app/node_modules/@scope/x/package.json', JSON.stringify({ version: '3.3.3' }));
    fs.mkdirSync(path.join(dir, 'ws/app/src/deep'), { recursive: true });
    expect(await nodePackages(path.join(dir, 'ws/app/src/deep'))).toEqual(['local==1.4.0', 'hoisted==2.0.1', '@scope/x==3.3.3', 'missing==?']);
  });

  it('a hostile package.json: names that walk out of node_modules are not followed, a version is cut, nothing breaks it', async () => {
    write('evil/package.json', '{"dependencies": {"../../../../etc": "1", "__proto__": "1", "ok": "1", "x\\ny": "1"}}'); // raw: a JS literal would drop __proto__
    write('evil/node_modules/ok/package.json', JSON.stringify({ version: 'v'.repeat(5000) }));
    write('evil/node_modules/__proto__/package.json', JSON.stringify({ version: '0.0.1' }));
    const got = (await nodePackages(path.join(dir, 'evil')))!;
    expect(got[0]).toBe('../../../../etc==?');
    expect(got).toContain('__proto__==0.0.1');
    expect(got.find((l) => l.startsWith('ok=='))!.length).toBeLessThanOrEqual(200);
    expect(got.every((l) => !/[\r\n]/.test(l))).toBe(true);
    // Not JSON, an array, a directory where the file should be: the next package.json up decides, or none.
    write('broken/a/package.json', '{not json');
    expect(await nodePackages(path.join(dir, 'broken/a'))).toBeNull();
    write('arr/package.json', '[1,2]');
    expect(await nodePackages(path.join(dir, 'arr'))).toBeNull();
    fs.mkdirSync(path.join(dir, 'dirjson/package.json'), { recursive: true });
    expect(await nodePackages(path.join(dir, 'dirjson'))).toBeNull();
  });

  it.skipIf(!nobody)('another user\'s directory is not read; a relative path is refused', async () => {
    write('theirs/package.json', JSON.stringify({ dependencies: { secret: '1' } }));
    execFileSync('chown', ['-R', 'nobody', path.join(dir, 'theirs')]);
    const r = new PackageReader();
    expect(await r.list(path.join(dir, 'theirs'))).toBeNull();
    expect(await r.list('relative/dir')).toBeNull();
    expect(await r.list(path.join(dir, 'ws/app'))).toContain('local==1.4.0');
  });
});
