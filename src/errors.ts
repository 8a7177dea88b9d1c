// Errors that carry a gRPC status code, so the daemon's handlers can answer
// with a clear status and the client can map statuses back to error classes.
import { status } from '@grpc/grpc-js';

export class LogdError extends Error {
  override name = 'LogdError';
  constructor(readonly code: status, message: string) {
    super(message);
  }
}

export const invalid = (msg: string) => new LogdError(status.INVALID_ARGUMENT, msg);
export const notFound = (msg: string) => new LogdError(status.NOT_FOUND, msg);
export const denied = (msg: string) => new LogdError(status.PERMISSION_DENIED, msg);
export const failedPrecondition = (msg: string) => new LogdError(status.FAILED_PRECONDITION, msg);
export const alreadyExists = (msg: string) => new LogdError(status.ALREADY_EXISTS, msg);
export const unavailable = (msg: string) => new LogdError(status.UNAVAILABLE, msg);
export const exhausted = (msg: string) => new LogdError(status.RESOURCE_EXHAUSTED, msg);
