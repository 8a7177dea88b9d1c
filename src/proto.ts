// The wire's codecs: message types from proto/logd/v1/logd.proto (parsed once
// with protobufjs, whose generated encoders are as fast as static code) and
// the gRPC service definition built from them, for the daemon (and for tests
// that speak the wire directly). The client does without them: parsing the
// .proto costs a fresh process tens of milliseconds (client/transport).
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
      // The same for answers: a read worker encodes history chunks itself (daemon/reads/encode-chunk.ts).
      responseSerialize: (m: unknown) => (m instanceof Uint8Array ? Buffer.from(m.buffer, m.byteOffset, m.byteLength) : Buffer.from(res.encode(m as protobuf.Message).finish())),
      responseDeserialize: (b: Buffer) => res.decode(b),
      originalName: method.name,
    };
  }
  return def as grpc.ServiceDefinition;
}

export const serviceDefinition = buildServiceDefinition();

/**
 * protobufjs builds a message type's encoder and decoder (generated code) at its first use: a fresh daemon's first
 * CreateRun, first batch and first FinishRun paid 8-10 ms of it on the 2-core machine. The daemon calls this once
 * its service file is written, while its first client is still finding it and connecting: the types of `methods`
 * (requests, answers and the messages inside them) are built one per turn of the event loop, so a request that
 * comes meanwhile waits for one type at most.
 */
export function warmCodecs(methods: readonly string[]): void {
  const todo: protobuf.Type[] = [];
  const seen = new Set<protobuf.Type>();
  const add = (t: protobuf.Type): void => {
    if (seen.has(t)) return;
    seen.add(t);
    todo.push(t);
    for (const f of t.fieldsArray) {
      f.resolve();
      if (f.resolvedType instanceof protobuf.Type) add(f.resolvedType);
    }
  };
  for (const m of root.lookupService(SERVICE_NAME).methodsArray) {
    if (methods.includes(m.name)) (add(root.lookupType(m.requestType)), add(root.lookupType(m.responseType)));
  }
  const next = (): void => {
    const t = todo.shift();
    if (!t) return;
    t.setup();
    setImmediate(next);
  };
  setImmediate(next);
}
