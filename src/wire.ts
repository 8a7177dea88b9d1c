// The wire's light half: the shapes of the messages of
// proto/logd/v1/logd.proto as the code reads them, the packed columns and the
// service address. Loading it costs nothing; the codecs and the gRPC service
// definition, which parse the .proto with protobufjs, are in proto.ts (the
// daemon's side; the client has its own in client/transport).
export const TOKEN_METADATA_KEY = 'x-logd-token';

// ---- Message shapes (what protobufjs produces/accepts) ----
export interface RankInfo { rank: number; localRank: number; worldSize: number; nodeRank: number; localWorldSize: number }
export interface ClientInfo { pid: number; host: string; rank?: RankInfo | null; clientVersion: string }
export interface RunInfo {
  id: string; project: string; name: string; group: string; jobType: string; tags: string[];
  state: string; stateReason: string; createdAt: number; finishedAt: number; exitCode: number;
  configJson: string; summaryJson: string; metadataJson: string; historyRows: number; writers: number;
  runToken: string; mode: string; notes: string; ownerWriterId: string; spoolDir?: string;
}
export interface RecordBatchMsg {
  seq: number; newKeys: string[]; newKeysFirst: number; rows: number;
  steps: Uint8Array; times: Uint8Array; counts: Uint8Array; keyIds: Uint8Array; values: Uint8Array;
  summaryJson: string[]; configJson: string[]; droppedRows?: number;
  /** The writer's code gave a step explicitly at least once (rank health judges only such steps). */
  stepsGiven?: boolean;
  /** Console output since the last batch: JSON objects {t, s: 'out' | 'err', l} (proto: RecordBatch.console_json). */
  consoleJson?: string[];
  /** Histograms, images and text (proto: RecordBatch.media; src/media.ts checks them). */
  media?: MediaMsg[];
}
/** One logged histogram, image or text (proto: Media). */
export interface MediaMsg {
  key: string; step: number; time: number; kind: string;
  counts?: Uint8Array; edges?: Uint8Array; nonfinite?: number;
  data?: Uint8Array; format?: string; width?: number; height?: number; caption?: string;
  text?: string;
}
export interface OpenWriterMsg { runId: string; runToken: string; writerId: string; client?: ClientInfo | null; keys: string[] }
export interface WriteRequestMsg { open?: OpenWriterMsg | null; batch?: RecordBatchMsg | null }
export interface WriteResponseMsg {
  opened?: { writerId: string; lastSeq: number; runState: string } | null;
  ack?: { seq: number } | null;
  control?: { kind: string; seq: number; message: string } | null;
}
export interface HistoryChunkMsg {
  keys: string[]; rows: number; steps: Uint8Array; times: Uint8Array; counts: Uint8Array;
  keyIds: Uint8Array; values: Uint8Array; writer: number;
  /** A downsampled answer only (ReadHistoryRequest.points > 0). */
  mins?: Uint8Array; maxs?: Uint8Array; storedPoints?: number;
  /** Only with ReadHistoryRequest.allAttempts: the rows' attempt, and whether a later rewind superseded them. */
  attempt?: number; superseded?: boolean;
  /** Only in a ReadHistories answer: the run these rows are of. */
  runId?: string;
}
/**
 * The first runs of a listing page that fit `budgetBytes` (their JSON fields and a little for the rest; at least
 * one): a ListRuns answer is cut by size so that no number or size of runs makes it exceed the message limit.
 */
export function fitRuns(page: RunInfo[], budgetBytes: number): RunInfo[] {
  const runs: RunInfo[] = [];
  let bytes = 0;
  for (const info of page) {
    bytes += info.configJson.length + info.summaryJson.length + info.metadataJson.length + 512;
    if (runs.length > 0 && bytes > budgetBytes) break;
    runs.push(info);
  }
  return runs;
}

/** A step of a run, where a rewind (resume_from) or a fork (fork_from) starts (proto: StepRef). */
export interface StepRef { runId: string; step: number }

// ---- Packed little-endian columns ----
// Typed arrays need aligned offsets, and bytes from the wire or a file are not
// aligned, so reading copies once into a fresh buffer (a memcpy).
export function f64(bytes: Uint8Array): Float64Array {
  if (bytes.byteLength % 8 !== 0) throw new RangeError(`column of ${bytes.byteLength} bytes is not a whole number of float64`);
  if (bytes.byteOffset % 8 === 0) return new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
  return new Float64Array(new Uint8Array(bytes).buffer); // copies: Buffer.slice() would not
}
export function u32(bytes: Uint8Array): Uint32Array {
  if (bytes.byteLength % 4 !== 0) throw new RangeError(`column of ${bytes.byteLength} bytes is not a whole number of uint32`);
  if (bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  return new Uint32Array(new Uint8Array(bytes).buffer);
}
export function bytesOf(a: Float64Array | Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

// ---- Service address: `unix:/path#token` or `host:port#token` ----
export interface ServiceAddress { target: string; token: string }

export function parseServiceAddress(s: string): ServiceAddress {
  const hash = s.lastIndexOf('#');
  if (hash <= 0 || hash === s.length - 1) {
    throw new Error(`LOGD_SERVICE=${JSON.stringify(s.replace(/#.*/, '#…'))} is not of the form unix:/path#token or host:port#token; unset it to let logd find or start its daemon`);
  }
  return { target: s.slice(0, hash), token: s.slice(hash + 1) };
}

export function formatServiceAddress(a: ServiceAddress): string {
  return `${a.target}#${a.token}`;
}
