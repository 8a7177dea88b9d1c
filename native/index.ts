// The typed facade over logd_native.node, and the only module that loads it.
// Option defaults and environment variables (env://) are resolved here; the
// native side receives fully explicit options.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, NativeUnavailableError, NotSupportedError, toNativeError } from './errors.js';
import type {
  Backend,
  InitProcessGroupOptions,
  NativeBinding,
  NativeBuildInfo,
  NativeGroupHandle,
  NativeInitOptions,
  ProcessGroup,
  ProcessGroupState,
  ReduceOp,
  Tensor,
} from './types.js';

export * from './errors.js';
export type * from './types.js';

const INSTALL_HINT = 'install libtorch with `sudo apt-get install libtorch-dev libgloo-dev`, then run `make native`';
const DEFAULT_TIMEOUT_MS = 600_000;

/** The package root: the nearest ancestor holding logd's package.json (works from native/ and dist/native/). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'logd') return dir;
    const up = dirname(dir);
    if (up === dir) return join(dirname(fileURLToPath(import.meta.url)), '..', '..');
    dir = up;
  }
}

/** Where the addon is expected: native/build/Release/logd_native.node under the package root. */
export const addonPath = join(packageRoot(), 'native', 'build', 'Release', 'logd_native.node');

let binding: NativeBinding | null = null;
let bindingError: string | null = null;
try {
  if (!existsSync(addonPath)) {
    bindingError = `logd native addon is not built (${addonPath} is missing): ${INSTALL_HINT}`;
  } else {
    binding = createRequire(import.meta.url)(addonPath) as NativeBinding;
  }
} catch (err) {
  bindingError = `logd native addon failed to load (${(err as Error).message.split('\n')[0]}): ${INSTALL_HINT}`;
}

/** True when the addon loaded (libtorch present and the addon built). */
export function isAvailable(): boolean {
  return binding !== null;
}

/** Why the addon is unavailable, with what to install; null when it loaded. */
export function loadError(): string | null {
  return bindingError;
}

function requireBinding(): NativeBinding {
  if (binding === null) throw new NativeUnavailableError(bindingError ?? INSTALL_HINT);
  return binding;
}

/** Backends compiled into the addon and the libtorch version it was built against. */
export function buildInfo(): NativeBuildInfo {
  return requireBinding().buildInfo();
}

function intFrom(value: number | undefined, envName: string, what: string, env: NodeJS.ProcessEnv): number {
  const raw = value ?? (env[envName] !== undefined ? Number(env[envName]) : undefined);
  if (raw === undefined || !Number.isInteger(raw) || raw < 0) {
    const how = envName ? `pass it or set ${envName}` : 'pass it in the options';
    throw new InvalidArgumentError(`initProcessGroup: ${what} must be a non-negative integer; ${how} (got ${envName ? env[envName] : value})`);
  }
  return raw;
}

/** Fills defaults and reads env:// variables; the only place that reads the environment. */
export function resolveInitOptions(opts: InitProcessGroupOptions, env: NodeJS.ProcessEnv = process.env): NativeInitOptions {
  if (opts.backend !== 'gloo' && opts.backend !== 'nccl') {
    throw new InvalidArgumentError(`initProcessGroup: backend must be 'gloo' or 'nccl' (got '${String(opts.backend)}')`);
  }
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new InvalidArgumentError(`initProcessGroup: timeoutMs must be a positive integer (got ${timeoutMs})`);
  const initMethod = opts.initMethod ?? 'env://';
  const checkCollectives = opts.checkCollectives ?? env.LOGD_CHECK_COLLECTIVES !== '0';
  const base = { backend: opts.backend, timeoutMs, checkCollectives, localRank: 0 };
  let resolved: NativeInitOptions;
  if (initMethod === 'env://') {
    const host = env.MASTER_ADDR;
    if (!host) throw new InvalidArgumentError('initProcessGroup: env:// needs MASTER_ADDR (and MASTER_PORT, RANK, WORLD_SIZE); `logd launch` sets them');
    const port = intFrom(undefined, 'MASTER_PORT', 'master port', env);
    resolved = { ...base, rank: intFrom(opts.rank, 'RANK', 'rank', env), worldSize: intFrom(opts.worldSize, 'WORLD_SIZE', 'world size', env), storeKind: 'tcp', host, port, path: null };
  } else if (initMethod.startsWith('tcp://')) {
    const url = new URL(initMethod);
    const port = Number(url.port);
    if (!url.hostname || !Number.isInteger(port) || port <= 0) throw new InvalidArgumentError(`initProcessGroup: initMethod must look like tcp://host:port (got '${initMethod}')`);
    resolved = { ...base, rank: intFrom(opts.rank, '', 'rank', {}), worldSize: intFrom(opts.worldSize, '', 'world size', {}), storeKind: 'tcp', host: url.hostname.replace(/^\[|\]$/g, ''), port, path: null };
  } else if (initMethod.startsWith('file://')) {
    const path = fileURLToPath(initMethod);
    resolved = { ...base, rank: intFrom(opts.rank, '', 'rank', {}), worldSize: intFrom(opts.worldSize, '', 'world size', {}), storeKind: 'file', host: null, port: null, path };
  } else {
    throw new InvalidArgumentError(`initProcessGroup: initMethod must be env://, tcp://host:port or file:///path (got '${initMethod}')`);
  }
  resolved.localRank = opts.localRank ?? (env.LOCAL_RANK !== undefined ? intFrom(undefined, 'LOCAL_RANK', 'local rank', env) : resolved.rank);
  if (resolved.worldSize < 1 || resolved.rank >= resolved.worldSize) {
    throw new InvalidArgumentError(`initProcessGroup: rank ${resolved.rank} is outside 0..${resolved.worldSize - 1}`);
  }
  if (resolved.port !== null && resolved.port > 65535) throw new InvalidArgumentError(`initProcessGroup: port ${resolved.port} is out of range`);
  return resolved;
}

/** Runs a native call, turning sync throws and rejections into LogdNativeError subclasses. */
async function call<T>(fn: () => Promise<T>): Promise<T> {
  const callSite = new Error();
  try {
    return await fn();
  } catch (err) {
    throw toNativeError(err, callSite);
  }
}

class NativeProcessGroup implements ProcessGroup {
  #state: ProcessGroupState = 'ready';
  #destroyed: Promise<void> | null = null;

  constructor(
    private readonly native: NativeBinding,
    private readonly handle: NativeGroupHandle,
    readonly rank: number,
    readonly worldSize: number,
    readonly backend: Backend,
  ) {}

  get state(): ProcessGroupState {
    return this.#state;
  }

  allReduce(tensor: Tensor, op: ReduceOp = 'sum'): Promise<void> {
    return call(() => this.native.allReduce(this.handle, tensor, op));
  }
  broadcast(tensor: Tensor, root: number): Promise<void> {
    return call(() => this.native.broadcast(this.handle, tensor, root));
  }
  allGather(output: Tensor, input: Tensor): Promise<void> {
    return call(() => this.native.allGather(this.handle, output, input));
  }
  reduceScatter(output: Tensor, input: Tensor, op: ReduceOp = 'sum'): Promise<void> {
    return call(() => this.native.reduceScatter(this.handle, output, input, op));
  }
  barrier(): Promise<void> {
    return call(() => this.native.barrier(this.handle));
  }
  destroy(): Promise<void> {
    if (this.#destroyed === null) {
      this.#state = 'destroying';
      this.#destroyed = call(() => this.native.destroy(this.handle)).finally(() => {
        this.#state = 'destroyed';
      });
    }
    return this.#destroyed;
  }
}

/**
 * Joins a process group (torch.distributed.init_process_group equivalent).
 * Rejects with CollectiveTimeoutError when the other ranks do not all arrive
 * within timeoutMs.
 */
export async function initProcessGroup(opts: InitProcessGroupOptions): Promise<ProcessGroup> {
  const callSite = new Error();
  try {
    const native = requireBinding();
    const resolved = resolveInitOptions(opts);
    if (!native.buildInfo().backends.includes(resolved.backend)) {
      throw new NotSupportedError(
        resolved.backend === 'nccl'
          ? `backend 'nccl' is not compiled in: this libtorch has no CUDA. Use backend 'gloo', or build against a CUDA libtorch (LOGD_TORCH_PREFIX) and re-run \`make native\``
          : `backend '${resolved.backend}' is not compiled in: the addon was built without gloo's headers (LOGD_WITH_GLOO=OFF, as with a pip libtorch). Use backend 'nccl', or install libgloo-dev and re-run \`make native\``,
      );
    }
    const handle = await native.initProcessGroup(resolved);
    return new NativeProcessGroup(native, handle, resolved.rank, resolved.worldSize, resolved.backend);
  } catch (err) {
    throw toNativeError(err, callSite);
  }
}
