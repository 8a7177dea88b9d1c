// The house rules, checked: no import cycles, and no import that runs against
// the one-way flow (docs/ARCHITECTURE.md). Run by `make test` before the
// suites; exits 1 with every offending import named.
//
// TypeScript: every relative import (static, `export … from`, `import type`
// and dynamic `import('…')`) of the rooms below, resolved to its file.
// Python: `from .x import …` / `from logd.x import …` / `from . import x`
// inside python/logd, function-level imports included (a lazy import is still
// a cycle a reader has to untangle).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// Each room, and the rooms it may import. A room imports itself freely (but
// without cycles). Rooms are matched longest-prefix first.
const ROOMS = {
  'src': [],
  'addon': [],
  'client': ['src', 'addon'],
  'daemon/store': ['src'],
  'daemon/sampler': ['src', 'daemon/store'],
  'daemon/process': ['src', 'addon'],
  // Rank health: judges progress the runs keep; reads /proc through the sampler's parser.
  'daemon/health': ['src', 'daemon/sampler'],
  'daemon/runs': ['src', 'daemon/store', 'daemon/sampler', 'daemon/health'],
  'daemon/reads': ['src', 'daemon/store'],
  'daemon/grpc': ['src', 'daemon/store', 'daemon/sampler', 'daemon/runs', 'daemon/reads'],
  // The shared store's small chunks merged in place (SQL only).
  'daemon/compaction': [],
  'daemon/upload': ['src', 'daemon/store', 'daemon/sampler', 'daemon/compaction'],
  // The query layer reads the local store through the daemon (as a client does) or the shared store.
  'daemon/query': ['src', 'client', 'daemon/store', 'daemon/upload'],
  'daemon/ui': ['src', 'daemon/query', 'daemon/views', 'daemon/alerts'],
  // The shared store's reads served on a private socket for a client library's reader (`logd reads-server`).
  'daemon/shared-reads': ['src', 'daemon/query'],
  // Saved dashboard views: a file in the data dir, or a table of the shared store.
  'daemon/views': ['src', 'daemon/upload'],
  // Alerts; a job over several nodes is read and claimed in the shared store (upload's URL, query's reader).
  'daemon/alerts': ['src', 'daemon/upload', 'daemon/query'],
  // The code a trainer runs: the git facts of its working directory, read by the daemon.
  'daemon/code': ['src'],
  // The composition root: the only file that wires the daemon's stages together.
  'daemon/daemon.ts': ['src', 'addon', 'daemon/store', 'daemon/sampler', 'daemon/process', 'daemon/runs', 'daemon/grpc', 'daemon/upload', 'daemon/health', 'daemon/alerts', 'daemon/code'],
  'launcher': ['src', 'client'],
  // The `logd` command: every program's entry point.
  'daemon/cli': ['src', 'client', 'launcher', 'daemon/daemon.ts', 'daemon/process', 'daemon/query', 'daemon/ui', 'daemon/upload', 'daemon/store', 'daemon/alerts', 'daemon/views', 'daemon/shared-reads', 'daemon/compaction'],
  // Its dispatcher: `serve` to cli/serve.ts, the rest to cli/program.ts.
  'daemon/cli.ts': ['daemon/cli'],
  'native': [],
  'web': ['src'],
  'examples': ['src', 'client', 'native'],
};
const SCAN = ['src', 'addon', 'client', 'daemon', 'launcher', 'native', 'web', 'examples'];
const roomNames = Object.keys(ROOMS).sort((a, b) => b.length - a.length);

function roomOf(rel) {
  for (const r of roomNames) if (rel === r || rel.startsWith(r + '/')) return r;
  return null;
}

function walk(dir, out) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    if (e.name === 'node_modules' || e.name === 'build' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (/\.(ts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const IMPORT_RE = /(?:^|[\s;])(?:import|export)\s(?:[^'"`;]*?\sfrom\s*)?['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

function stripComments(src) {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

function resolveTs(from, spec) {
  const base = path.resolve(path.dirname(from), spec);
  for (const c of [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mjs'), base, base + '.ts', path.join(base, 'index.ts')]) {
    if (fs.existsSync(c) && fs.statSync(c).isFile()) return c;
  }
  return null;
}

const problems = [];
const graph = new Map(); // file -> Set(file)

for (const top of SCAN) {
  for (const file of walk(path.join(root, top), [])) {
    const rel = path.relative(root, file);
    const from = roomOf(rel);
    const src = stripComments(fs.readFileSync(file, 'utf8'));
    const edges = new Set();
    for (const m of src.matchAll(IMPORT_RE)) {
      const spec = m[1] ?? m[2];
      const target = resolveTs(file, spec);
      if (!target) continue; // a generated or built file (e.g. a .node addon): not part of the graph
      const trel = path.relative(root, target);
      edges.add(trel);
      const to = roomOf(trel);
      if (!from || !to || from === to) continue;
      if (!ROOMS[from].includes(to)) problems.push(`${rel} imports ${trel}: ${from}/ may not import ${to}/ (allowed: ${ROOMS[from].join(', ') || 'nothing outside itself'})`);
    }
    graph.set(rel, edges);
  }
}

// Python: python/logd, module -> modules it imports from the package.
const pyRoot = path.join(root, 'python', 'logd');
function pyFiles(dir, out = []) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== '__pycache__') pyFiles(p, out);
    else if (e.name.endsWith('.py')) out.push(p);
  }
  return out;
}
if (fs.existsSync(pyRoot)) {
  const modOf = (file) => path.relative(pyRoot, file).replace(/\.py$/, '').replace(/\/__init__$/, '').replace(/^__init__$/, '').split('/').join('.');
  const known = new Map(pyFiles(pyRoot).map((f) => [modOf(f), f]));
  for (const [mod, file] of known) {
    const pkg = file.endsWith('__init__.py') ? mod : mod.split('.').slice(0, -1).join('.');
    const src = fs.readFileSync(file, 'utf8').replace(/"""[\s\S]*?"""/g, '').replace(/#.*$/gm, '');
    const edges = new Set();
    const add = (target) => {
      if (target !== mod && known.has(target) && target !== '') edges.add(`python/logd:${target}`);
    };
    for (const m of src.matchAll(/^\s*from\s+(\.+)([\w.]*)\s+import\s+([\w, ()\n]+)/gm)) {
      const up = m[1].length - 1;
      const base = pkg.split('.').filter(Boolean);
      const prefix = base.slice(0, base.length - up).concat(m[2] ? m[2].split('.') : []).join('.');
      if (m[2]) add(prefix);
      else for (const name of m[3].replace(/[()\n]/g, ' ').split(',').map((s) => s.trim().split(/\s+/)[0]).filter(Boolean)) add(prefix ? `${prefix}.${name}` : name);
    }
    for (const m of src.matchAll(/^\s*(?:from|import)\s+logd\.([\w.]+)/gm)) add(m[1]);
    graph.set(`python/logd:${mod || '__init__'}`, edges);
  }
}

// Cycles: Tarjan's strongly connected components; every component of more
// than one file (or a file importing itself) is a cycle.
let index = 0;
const stack = [];
const info = new Map();
function strong(v) {
  info.set(v, { index, low: index, on: true });
  index++;
  stack.push(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!info.has(w)) {
      strong(w);
      info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
    } else if (info.get(w).on) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
  }
  if (info.get(v).low === info.get(v).index) {
    const comp = [];
    let w;
    do {
      w = stack.pop();
      info.get(w).on = false;
      comp.push(w);
    } while (w !== v);
    if (comp.length > 1 || graph.get(v)?.has(v)) problems.push(`import cycle: ${comp.sort().join(' ↔ ')}`);
  }
}
for (const v of graph.keys()) if (!info.has(v)) strong(v);

if (problems.length) {
  console.error(`check-imports: ${problems.length} problem(s); see docs/ARCHITECTURE.md for the rooms and what each may import:`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
console.log(`check-imports: ${graph.size} files, no cycles, every import runs with the flow`);
