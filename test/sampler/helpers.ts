// Shared by the sampler tests: a PATH with the fake nvidia-smi, and bounded waits.
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'nvidia-smi');
export const FAKE = join(FIXTURES, 'fake-nvidia-smi');

/**
 * Puts a temp dir first on PATH: holding a symlink `nvidia-smi` → the fake when
 * `withFake`, nothing otherwise. Node's own dir follows (the fake's shebang needs
 * it), then nothing else, so a real nvidia-smi on this machine cannot interfere.
 * Returns a function restoring PATH and FAKE_NVSMI_* variables.
 */
export function useFakePath(withFake = true): { dir: string; restore: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'logd-nvsmi-'));
  if (withFake) symlinkSync(FAKE, join(dir, 'nvidia-smi'));
  const saved = { ...process.env };
  process.env.PATH = `${dir}:${dirname(process.execPath)}`;
  return {
    dir,
    restore: () => {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Deadlines are for conditions that should come in well under them; on a
 * shared, loaded 2-core machine the sampler's child processes start slowly,
 * so every deadline here is stretched (LOGD_TEST_DEADLINE_FACTOR, default 3).
 */
const FACTOR = Number(process.env.LOGD_TEST_DEADLINE_FACTOR) || 3;

/** Polls `check` every 25 ms until it returns a value other than undefined/false, or fails after `ms` (× FACTOR). */
export async function waitFor<T>(what: string, ms: number, check: () => T | undefined | false): Promise<T> {
  ms *= FACTOR;
  const until = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
