// The whole native surface of logd_native.node, in the order addon.cc
// registers it, plus the public types of the facade (native/index.ts).
// Data crossing the boundary sets every field explicitly (T | null).

/** Communication backend: gloo runs on CPU; nccl needs a CUDA build of libtorch. */
export type Backend = 'gloo' | 'nccl';
/** Reduction for allReduce / reduceScatter. gloo has no native avg: logd sums, then divides (Int32Array: truncating). */
export type ReduceOp = 'sum' | 'avg' | 'min' | 'max' | 'product';
/** Tensors are typed arrays, used in place (zero-copy, honouring byteOffset). */
export type Tensor = Float32Array | Float64Array | Int32Array;

declare const groupHandleBrand: unique symbol;
/** Opaque handle of a native process group (an External). */
export interface NativeGroupHandle {
  readonly [groupHandleBrand]: true;
}

export interface NativeBuildInfo {
  backends: Backend[];
  torchVersion: string;
}

export interface NativeInitOptions {
  backend: Backend;
  rank: number;
  worldSize: number;
  storeKind: 'tcp' | 'file';
  host: string | null; // storeKind 'tcp'
  port: number | null; // storeKind 'tcp'
  path: string | null; // storeKind 'file'
  timeoutMs: number;
  checkCollectives: boolean;
  localRank: number; // CUDA device index for nccl; unused by gloo
}

/** Exactly what addon.cc registers, same names, same order. Every promise rejects with an Error whose `name` is a NativeErrorName. */
export interface NativeBinding {
  buildInfo(): NativeBuildInfo;
  initProcessGroup(options: NativeInitOptions): Promise<NativeGroupHandle>;
  allReduce(group: NativeGroupHandle, tensor: Tensor, op: ReduceOp): Promise<void>;
  broadcast(group: NativeGroupHandle, tensor: Tensor, root: number): Promise<void>;
  allGather(group: NativeGroupHandle, output: Tensor, input: Tensor): Promise<void>;
  reduceScatter(group: NativeGroupHandle, output: Tensor, input: Tensor, op: ReduceOp): Promise<void>;
  barrier(group: NativeGroupHandle): Promise<void>;
  destroy(group: NativeGroupHandle): Promise<void>;
}

/** Names set by native/src/errors.h (plus NativeUnavailableError from the facade). */
export type NativeErrorName =
  | 'LogdNativeError'
  | 'NativeUnavailableError'
  | 'InvalidArgumentError'
  | 'CollectiveTimeoutError'
  | 'PeerLostError'
  | 'NotSupportedError'
  | 'ProcessGroupDestroyedError'
  | 'InitProcessGroupError';

export interface InitProcessGroupOptions {
  backend: Backend;
  /** `env://` (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE as torchrun sets them), `tcp://host:port` or `file:///path`. Default `env://`. */
  initMethod?: string;
  /** Required for tcp:// and file://; for env:// defaults to $RANK. */
  rank?: number;
  /** Required for tcp:// and file://; for env:// defaults to $WORLD_SIZE. */
  worldSize?: number;
  /** Deadline for rendezvous and for every collective. Default 600000 (10 min). */
  timeoutMs?: number;
  /**
   * Before every collective, all-gather a small fingerprint (op, dtype, sizes,
   * root) so ranks that disagree get InvalidArgumentError instead of gloo
   * aborting the process or hanging. Costs one tiny extra collective per call
   * (visible only for small messages). Default true unless LOGD_CHECK_COLLECTIVES=0;
   * must be the same on every rank.
   */
  checkCollectives?: boolean;
  /** CUDA device for nccl (host arrays are staged through it). Default $LOCAL_RANK, else rank. */
  localRank?: number;
}

/** Lifecycle of a ProcessGroup object. */
export type ProcessGroupState = 'ready' | 'destroying' | 'destroyed';

/**
 * A process group. Collectives are issued to the backend in call order (every
 * rank must call them in the same order) and complete in that order. The
 * typed arrays passed in are used in place and must not be transferred or
 * resized until the promise settles.
 */
export interface ProcessGroup {
  readonly rank: number;
  readonly worldSize: number;
  readonly backend: Backend;
  readonly state: ProcessGroupState;
  /** In place: every rank ends with the reduction of all ranks' arrays. */
  allReduce(tensor: Tensor, op?: ReduceOp): Promise<void>;
  /** In place: every rank ends with root's array. */
  broadcast(tensor: Tensor, root: number): Promise<void>;
  /** output.length must be input.length * worldSize; rank r's input lands at offset r * input.length. */
  allGather(output: Tensor, input: Tensor): Promise<void>;
  /** input.length must be output.length * worldSize. gloo (libtorch 1.13) rejects with NotSupportedError. */
  reduceScatter(output: Tensor, input: Tensor, op?: ReduceOp): Promise<void>;
  barrier(): Promise<void>;
  /** Waits (off the event loop) for earlier ops, then frees the group. Later calls reject with ProcessGroupDestroyedError. Idempotent. */
  destroy(): Promise<void>;
}
