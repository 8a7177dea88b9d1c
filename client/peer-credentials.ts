// Before a client sends anything to a daemon (not even the token), it checks
// that the daemon runs as the same user: what SO_PEERCRED would say, which
// Node does not expose. Linux gives the same answer through files:
//
// - Unix socket: the socket's directory must be private to the user (see
//   src/private-dir.ts), so only the user (or root) can have bound a socket
//   there; the socket file, which bind() creates with the binder's uid, must
//   be the user's; and the process that holds the listening socket (the pid
//   in the service file next to it, matched by the socket's inode in
//   /proc/net/unix and /proc/<pid>/fd) must run as the user.
// - TCP on loopback: /proc/net/tcp{,6} names the uid that owns each listening
//   socket; it must be the user's.
// - TCP to another host: nothing on this node can vouch for it. The token
//   authenticates the client to the daemon, not the daemon to the client
//   (README, "Threat model").
//
// The check runs when a channel to an address is made. A Unix socket in a
// private directory cannot be replaced by another user afterwards; a loopback
// TCP port can, once its daemon has exited, which is why the Unix socket is
// what clients on the node use by default.
import fs from 'node:fs';
import path from 'node:path';
import { untrustedDirReason } from '../src/private-dir.js';

export class UntrustedDaemonError extends Error {
  override name = 'UntrustedDaemonError';
}

const myUid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0);

function refuse(target: string, why: string): never {
  throw new UntrustedDaemonError(`logd: refusing to talk to the daemon at ${target}: ${why}. It may belong to another local user; nothing was sent. ` +
    'Unset LOGD_SERVICE (or set it to your own daemon), or set XDG_RUNTIME_DIR (or LOGD_RUNTIME_DIR) to a directory only you can write.');
}

/** Throws UntrustedDaemonError unless the daemon at `target` ("unix:/path" or "host:port") runs as this user, as far as this node can tell. */
export function verifyDaemonPeer(target: string): void {
  if (process.platform !== 'linux') return;
  if (target.startsWith('unix:')) return verifyUnixPeer(target.slice('unix:'.length));
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(target);
  if (m) verifyLoopbackTcpPeer(target, m[1] ?? m[2], Number(m[3]));
}

function verifyUnixPeer(sock: string): void {
  const uid = myUid();
  const target = `unix:${sock}`;
  const dirWhy = untrustedDirReason(path.dirname(sock), uid);
  if (dirWhy) refuse(target, `its directory is not private to you: ${dirWhy}`);
  let st: fs.Stats;
  try {
    st = fs.lstatSync(sock);
  } catch {
    return; // nothing there: the call fails as unavailable, and nothing reaches anyone
  }
  if (!st.isSocket()) refuse(target, `${sock} is not a socket`);
  if (st.uid !== uid) refuse(target, `${sock} is owned by uid ${st.uid}, not by you (uid ${uid})`);
  const holder = listenerProcess(sock);
  if (holder && holder.uid !== uid) refuse(target, `the process listening on it (pid ${holder.pid}) runs as uid ${holder.uid}, not as you (uid ${uid})`);
}

/** The pid and effective uid of the daemon that holds the listening socket at `sock`; null when it cannot be told. */
function listenerProcess(sock: string): { pid: number; uid: number } | null {
  let pid: number;
  try {
    pid = (JSON.parse(fs.readFileSync(path.join(path.dirname(sock), 'service.json'), 'utf8')) as { pid: number }).pid;
  } catch {
    return null;
  }
  const inodes = listeningUnixInodes(sock);
  if (!Number.isInteger(pid) || inodes.size === 0) return null;
  try {
    const holds = fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        return link.startsWith('socket:[') && inodes.has(link.slice(8, -1));
      } catch {
        return false;
      }
    });
    if (!holds) return null;
    const uidLine = /^Uid:\s+(\d+)\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return uidLine ? { pid, uid: Number(uidLine[2]) } : null;
  } catch {
    return null; // another user's process: /proc/<pid>/fd is not readable, and the file checks above already hold
  }
}

/** Inodes of listening Unix sockets bound at `sock` (/proc/net/unix: Num RefCount Protocol Flags Type St Inode Path). */
function listeningUnixInodes(sock: string): Set<string> {
  const out = new Set<string>();
  let text: string;
  try {
    text = fs.readFileSync('/proc/net/unix', 'utf8');
  } catch {
    return out;
  }
  const SO_ACCEPTCON = 0x10000;
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || f.slice(7).join(' ') !== sock) continue;
    if (parseInt(f[3], 16) & SO_ACCEPTCON) out.add(f[6]);
  }
  return out;
}

const LOOPBACK_V4 = /^127\./;

/** Whether a listening address (hex, as /proc/net/tcp{,6} prints it) answers connections to loopback: any address, 127.x, ::1, or ::ffff:127.x. */
function reachesLoopback(hexIp: string): boolean {
  if (/^0+$/.test(hexIp)) return true;
  if (hexIp.length === 8) return hexIp.endsWith('7F'); // little-endian: the first octet is the last byte
  return hexIp === '00000000000000000000000001000000' || (hexIp.startsWith('0000000000000000FFFF0000') && (hexIp.endsWith('7F') || hexIp.endsWith('00000000')));
}

function verifyLoopbackTcpPeer(target: string, host: string, port: number): void {
  if (!(host === 'localhost' || host === '::1' || LOOPBACK_V4.test(host))) return;
  const uid = myUid();
  const TCP_LISTEN = '0A';
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid …
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 8 || f[3] !== TCP_LISTEN) continue;
      const [ip, hexPort] = f[1].split(':');
      if (parseInt(hexPort, 16) !== port || !reachesLoopback(ip)) continue;
      const owner = Number(f[7]);
      if (owner !== uid) refuse(target, `the socket listening on port ${port} belongs to uid ${owner}, not to you (uid ${uid})`);
    }
  }
}
