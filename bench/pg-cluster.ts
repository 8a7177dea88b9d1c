// A throwaway PostgreSQL 15 for tests: `initdb` in a temp dir, run as the
// unprivileged `postgres` user when we are root (PostgreSQL refuses to run as
// root), listening on a private Unix socket dir and a free 127.0.0.1 port,
// stopped and removed in teardown. `pgUnavailable()` says why none can be had,
// so suites skip with the reason instead of failing.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';

export const PG_BIN = process.env.LOGD_TEST_PG_BIN || '/usr/lib/postgresql/15/bin';
const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** null when a cluster can be started here; otherwise the reason it cannot. */
export function pgUnavailable(): string | null {
  if (!fs.existsSync(path.join(PG_BIN, 'initdb'))) return `PostgreSQL 15 is not installed (${PG_BIN}/initdb missing); install Debian's postgresql (scripts/install-system-deps.sh does, as root)`;
  if (asRoot && spawnSync('id', ['-u', 'postgres']).status !== 0) return 'running as root but there is no `postgres` user to run the cluster as';
  return null;
}

export interface PgCluster {
  /** postgres://logd:<password>@127.0.0.1:<port>/logd */
  url: string;
  /** The same database over the Unix socket: postgres://logd:<password>@/logd?host=<dir> */
  socketUrl: string;
  port: number;
  password: string;
  /** A URL for another database of this cluster (created with createDatabase). */
  urlFor(db: string, password?: string): string;
  createDatabase(db: string): void;
  /** Runs SQL as the superuser through psql; returns the unaligned output. */
  psql(sql: string, db?: string): string;
  stop(): void;
  start(): void;
  /** Stops the server and removes its files. */
  destroy(): void;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function run(cmd: string, args: string[], opts: { input?: string } = {}): string {
  const full = asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] as const : [cmd, args] as const;
  try {
    return execFileSync(full[0], full[1] as string[], { encoding: 'utf8', input: opts.input, stdio: ['pipe', 'pipe', 'pipe'], timeout: 120_000 });
  } catch (e) {
    const err = e as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${path.basename(cmd)} failed: ${err.stderr || err.stdout || err.message}`);
  }
}

/** `maxConnections`: the server's max_connections (100 unless said; bench/cluster gives one per simulated node). */
export async function startPg(opts: { maxConnections?: number } = {}): Promise<PgCluster> {
  const why = pgUnavailable();
  if (why) throw new Error(why);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-pg-'));
  const dataDir = path.join(dir, 'data');
  const sockDir = path.join(dir, 'sock');
  fs.mkdirSync(sockDir);
  if (asRoot) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  const password = `pw${Math.random().toString(36).slice(2, 12)}`;
  run(path.join(PG_BIN, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--auth-host=scram-sha-256', '--no-sync', '-E', 'UTF8', '--locale=C']);
  // Local socket: trust for the test's superuser; TCP: passwords, as on a real server.
  fs.appendFileSync(path.join(dataDir, 'postgresql.conf'), [
    `port = ${port}`, `listen_addresses = '127.0.0.1'`, `unix_socket_directories = '${sockDir}'`,
    'fsync = off', 'synchronous_commit = off', 'full_page_writes = off', `max_connections = ${opts.maxConnections ?? 100}`, '',
  ].join('\n'));
  const logFile = path.join(dir, 'server.log');
  const pgctl = (args: string[]) => run(path.join(PG_BIN, 'pg_ctl'), ['-D', dataDir, '-l', logFile, '-w', '-t', '120', ...args]);
  pgctl(['start']);
  const psql = (sql: string, db = 'postgres') =>
    run(path.join(PG_BIN, 'psql'), ['-h', sockDir, '-p', String(port), '-U', 'postgres', '-d', db, '-v', 'ON_ERROR_STOP=1', '-AtX', '-c', sql]);
  psql(`CREATE ROLE logd LOGIN PASSWORD '${password}'`);
  psql('CREATE DATABASE logd OWNER logd');
  let stopped = false;
  const cluster: PgCluster = {
    url: `postgres://logd:${password}@127.0.0.1:${port}/logd`,
    socketUrl: `postgres://logd:${password}@/logd?host=${encodeURIComponent(sockDir)}&port=${port}`,
    port,
    password,
    urlFor: (db, pw = password) => `postgres://logd:${pw}@127.0.0.1:${port}/${db}`,
    createDatabase: (db) => void psql(`CREATE DATABASE ${db} OWNER logd`),
    psql,
    stop: () => {
      if (stopped) return;
      pgctl(['stop', '-m', 'fast']);
      stopped = true;
    },
    start: () => {
      if (!stopped) return;
      pgctl(['start']);
      stopped = false;
    },
    destroy: () => {
      try {
        cluster.stop();
      } catch {
        /* already down */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
