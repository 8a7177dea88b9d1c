// Constant-time comparison of secrets (the daemon token, run tokens).
import { createHash, timingSafeEqual } from 'node:crypto';

/** Hashes first, so the comparison takes the same time whatever the lengths. */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}
