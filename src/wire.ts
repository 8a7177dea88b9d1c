// The wire: message types from proto/logd/v1/logd.proto (parsed once with
// protobufjs, whose generated encoders are as fast as static code) and the
// gRPC service definition built from them, shared by daemon and client.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import type * as grpc from '@grpc/grpc-js';

// 64-bit integers decode as JS numbers (sequence numbers stay far below 2^53).
protobuf.util.Long = undefined as unknown as typeof protobuf.util.Long;
protobuf.configure();

function findProto(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = path.join(dir, 'proto', 'logd', 'v1', 'logd.proto');
    if (existsSync(candidate)) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error('wire: proto/logd/v1/logd.proto not found next to the logd package; reinstall logd');
}

export const root = protobuf.loadSync(findProto());
export const SERVICE_NAME = 'logd.v1.Logd';

export function messageType(name: string): protobuf.Type {
  return root.lookupType(`logd.v1.${name}`);
}

/**
 * A request the daemon could not decode. Handlers answer it with
 * INVALID_ARGUMENT themselves: when grpc-js's own deserializer throws on a
 * message of a stream, the call can be left without any status at all.
 */
export class Undecodable {
  constructor(readonly reason: string) {}
}

/** A grpc-js service definition whose (de)serializers are protobufjs codecs. */
function buildServiceDefinition(): grpc.ServiceDefinition {
  const svc = root.lookupService(SERVICE_NAME);
  const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of svc.methodsArray) {
    const req = root.lookupType(method.requestType);
    const res = root.lookupType(method.responseType);
    const name = method.name[0].toLowerCase() + method.name.slice(1);
    def[name] = {
      path: `/${SERVICE_NAME}/${method.name}`,
      requestStream: !!method.requestStream,
      responseStream: !!method.responseStream,
      // A Uint8Array is a message the caller already encoded (the client keeps
      // batches encoded until they are acknowledged).
      requestSerialize: (m: unknown) => (m instanceof Uint8Array ? Buffer.from(m.buffer, m.byteOffset, m.byteLength) : Buffer.from(req.encode(m as protobuf.Message).finish())),
      requestDeserialize: (b: Buffer) => {
        try {
          return req.decode(b);
        } catch (e) {
          return new Undecodable(`${method.name}: the message is not a valid ${req.name} (${(e as Error).message})`);
        }
      },
      responseSerialize: (m: unknown) => Buffer.from(res.encode(m as protobuf.Message).finish()),
      responseDeserialize: (b: Buffer) => res.decode(b),
      originalName: method.name,
    };
  }
  return def as grpc.ServiceDefinition;
}

export const serviceDefinition = buildServiceDefinition();
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
}

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
