// TS classes for the error names native code sets (native/src/errors.h).
// `toNativeError` is the one place that maps them, for sync throws and
// promise rejections alike.
import type { NativeErrorName } from './types.js';

export class LogdNativeError extends Error {
  override name: NativeErrorName = 'LogdNativeError';
}
/** The addon is not built or libtorch is missing; the message says what to install. */
export class NativeUnavailableError extends LogdNativeError {
  override name = 'NativeUnavailableError' as const;
}
export class InvalidArgumentError extends LogdNativeError {
  override name = 'InvalidArgumentError' as const;
}
/** Rendezvous or a collective did not finish within timeoutMs (a peer is slow, stuck or never started). */
export class CollectiveTimeoutError extends LogdNativeError {
  override name = 'CollectiveTimeoutError' as const;
}
/** A peer's connection closed mid-collective (it crashed or was killed). */
export class PeerLostError extends LogdNativeError {
  override name = 'PeerLostError' as const;
}
export class NotSupportedError extends LogdNativeError {
  override name = 'NotSupportedError' as const;
}
export class ProcessGroupDestroyedError extends LogdNativeError {
  override name = 'ProcessGroupDestroyedError' as const;
}
export class InitProcessGroupError extends LogdNativeError {
  override name = 'InitProcessGroupError' as const;
}

const classes: Record<NativeErrorName, new (message: string) => LogdNativeError> = {
  LogdNativeError,
  NativeUnavailableError,
  InvalidArgumentError,
  CollectiveTimeoutError,
  PeerLostError,
  NotSupportedError,
  ProcessGroupDestroyedError,
  InitProcessGroupError,
};

/**
 * Wraps whatever native code threw in the matching class. `callSite` is an
 * Error captured before the async call, so the stack shows the caller rather
 * than an empty native frame.
 */
export function toNativeError(err: unknown, callSite: Error): LogdNativeError {
  if (err instanceof LogdNativeError) return err;
  const name = (err as { name?: unknown })?.name;
  const message = err instanceof Error ? err.message : String(err);
  const Cls = typeof name === 'string' && name in classes ? classes[name as NativeErrorName] : LogdNativeError;
  const wrapped = new Cls(message);
  const frames = (callSite.stack ?? '').split('\n').slice(1).join('\n');
  wrapped.stack = `${wrapped.name}: ${message}\n${frames}`;
  return wrapped;
}
