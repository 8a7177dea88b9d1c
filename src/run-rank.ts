// A run's rank (metadata.rank.rank, as the daemon keeps the torchrun RANK its
// owner gave), read from its listing; null for a run of no rank.
import type { RunInfo } from './wire.js';

export function runRank(r: Pick<RunInfo, 'metadataJson'>): number | null {
  try {
    const m = JSON.parse(r.metadataJson || '{}') as { rank?: { rank?: number } | null };
    return typeof m.rank?.rank === 'number' && m.rank.rank >= 0 ? m.rank.rank : null;
  } catch {
    return null;
  }
}
