// The uploader's errors for people: what happened and what to do, with the password cut out; and which errors
// mean a store that is away for now (uploads resume by themselves).
import { redact, type StoreUrl } from './url.js';
import { StoreRefused } from './schema.js';
import { lacksPassword, NO_PASSWORD } from './pgpass.js';

export function describeUploadError(e: unknown, url: StoreUrl): string {
  const err = e as Error & { code?: string };
  const where = url.shown;
  let text: string;
  if (e instanceof StoreRefused) text = `the shared store at ${where} is refused: ${err.message}`;
  else if (lacksPassword(e)) text = `the shared store at ${where} asks for a password and ${NO_PASSWORD}. The daemon reads ~/.pgpass again on each try; a new environment or file takes a restart`;
  else if (err.code === '28P01' || err.code === '28000') text = `the shared store at ${where} refused the login (${err.message}); fix the user or password where the daemon gets them: LOGD_UPLOAD_URL, the --upload-url-file or ~/.pgpass`;
  else if (err.code === '3D000') text = `the shared store at ${where}: ${err.message}; create it (createdb) or fix the database name in the upload URL`;
  else if (unreachable(err)) {
    text = `cannot reach the shared store at ${where} (${err.code ?? err.message}); uploads resume when it answers`;
  } else if (['42703', '42P01', '42804', '42P10'].includes(err.code ?? '')) {
    // A column or table missing, or of another type: the store's tables were altered by hand.
    text = `uploading to ${where} failed: ${err.message}: the store's tables are not as logd writes them; \`logd store migrate\` checks every table and column, repairs what it can and says what differs`;
  } else text = `uploading to ${where} failed: ${err.message}`;
  return redact(text, url);
}

/** A store that is away for now: not listening, restarting, shutting down or cut off. Uploads resume by themselves. */
export function unreachable(err: Error & { code?: string }): boolean {
  const code = err.code ?? '';
  // 57P01-03: the server is shutting down, crashed, or not yet accepting connections; class 08: the connection failed.
  if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'ENOENT', '57P01', '57P02', '57P03'].includes(code)) return true;
  if (code.startsWith('08')) return true;
  return /timeout|terminat|Connection/i.test(err.message);
}
