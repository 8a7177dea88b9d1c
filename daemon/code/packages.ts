// The installed packages of a TypeScript trainer, read by the daemon from its working directory (docs/api.md
// "Code and environment"): `name==version` for each dependency of the nearest package.json (from the directory
// up), with the version installed under node_modules as Node would resolve it, `name==?` where none is. Read
// here, not in the trainer, for the same reason as the git facts (git.ts): a few milliseconds of file reads
// that every short process would pay, done once per directory for the runs started there within CACHE_MS.
// A Python trainer sends its own list (the daemon cannot see its interpreter's sys.path).
import fs from 'node:fs';
import path from 'node:path';
import { CACHE_MS } from './git.js';

/** The most dependencies listed: a package.json with more is a workspace root, not a trainer. */
const MAX_DEPENDENCIES = 300;
const MAX_CACHED = 256;
const NAME = /^(@[\w.-]+\/)?[\w.-]+$/;

async function readJson(file: string): Promise<Record<string, unknown> | null> {
  try {
    const st = await fs.promises.stat(file);
    if (!st.isFile() || st.size > 4 << 20) return null;
    const v = JSON.parse(await fs.promises.readFile(file, 'utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

async function installedVersion(from: string, name: string): Promise<string | null> {
  if (!NAME.test(name)) return null;
  for (let dir = from, i = 0; i < 32; i++) {
    const pkg = await readJson(path.join(dir, 'node_modules', name, 'package.json'));
    if (pkg) return typeof pkg.version === 'string' ? pkg.version.slice(0, 100) : null;
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

/** The dependencies of the nearest package.json from `cwd` up, as installed; null when there is none. */
export async function nodePackages(cwd: string): Promise<string[] | null> {
  let dir = cwd;
  for (let i = 0; i < 32; i++) {
    const pkg = await readJson(path.join(dir, 'package.json'));
    if (pkg) {
      const deps = (o: unknown) => (o && typeof o === 'object' ? Object.keys(o) : []);
      const names = [...new Set([...deps(pkg.dependencies), ...deps(pkg.devDependencies)])].slice(0, MAX_DEPENDENCIES);
      const versions = await Promise.all(names.map((n) => installedVersion(dir, n)));
      return names.map((n, k) => `${n}==${versions[k] ?? '?'}`.slice(0, 200).replace(/[\r\n]/g, ' '));
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

/** nodePackages(), one answer per directory for CACHE_MS; only a directory owned by the daemon's user is read. */
export class PackageReader {
  private readonly cache = new Map<string, { at: number; list: Promise<string[] | null> }>();

  list(cwd: string): Promise<string[] | null> {
    if (typeof cwd !== 'string' || !path.isAbsolute(cwd) || cwd.length > 4096 || cwd.includes('\0')) return Promise.resolve(null);
    const dir = path.normalize(cwd);
    const now = Date.now();
    const hit = this.cache.get(dir);
    if (hit && now - hit.at < CACHE_MS) return hit.list;
    const list = (async () => {
      try {
        const st = await fs.promises.stat(dir);
        const uid = process.getuid?.();
        if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) return null;
        return await nodePackages(dir);
      } catch {
        return null;
      }
    })();
    this.cache.set(dir, { at: now, list });
    if (this.cache.size > MAX_CACHED) for (const [k, v] of this.cache) if (now - v.at >= CACHE_MS || this.cache.size > MAX_CACHED) this.cache.delete(k);
    return list;
  }
}
