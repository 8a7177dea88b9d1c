// One version for logd: package.json's "version" is the source. This writes
// it into the two places that code reads it from without touching
// package.json at run time (a fresh process pays nothing for it):
//   src/version.ts          LOGD_VERSION: `logd --version`, Hello, the service file
//   python/logd/_version.py __version__ (and the wheel's version, through pyproject's dynamic version)
// plus the wire protocol (src/config.ts's PROTOCOL_VERSION) into _version.py.
// `make build` runs it first; `--check` only says whether they agree (exit 1 if not).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
if (!/^\d+\.\d+\.\d+([.-]?[0-9A-Za-z.]+)?$/.test(version)) throw new Error(`package.json: version ${version} is not MAJOR.MINOR.PATCH`);
const config = fs.readFileSync(path.join(root, 'src', 'config.ts'), 'utf8');
const protocol = /export const PROTOCOL_VERSION = (\d+);/.exec(config)?.[1];
if (!protocol) throw new Error('src/config.ts: `export const PROTOCOL_VERSION = N;` not found');

const files = {
  'src/version.ts':
    `// Written by packaging/sync-version.mjs from package.json's "version" (the one source); do not edit.\n` +
    `export const LOGD_VERSION = '${version}';\n`,
  'python/logd/_version.py':
    `# Written by packaging/sync-version.mjs from package.json's "version" (the one source); do not edit.\n` +
    `__version__ = "${version}"\n` +
    `# The wire protocol this client speaks (src/config.ts PROTOCOL_VERSION); sent with every call as x-logd-protocol.\n` +
    `PROTOCOL_VERSION = ${protocol}\n`,
};
const check = process.argv.includes('--check');
let stale = [];
for (const [rel, text] of Object.entries(files)) {
  const file = path.join(root, rel);
  const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
  if (now === text) continue;
  if (check) stale.push(rel);
  else fs.writeFileSync(file, text);
}
if (stale.length) {
  console.error(`sync-version: ${stale.join(', ')} do not say version ${version} / protocol ${protocol} of package.json and src/config.ts; run node packaging/sync-version.mjs`);
  process.exit(1);
}
