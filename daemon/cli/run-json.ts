// A run as the CLI shows it (`runs`, `show --json`, `export`): its fields with config, summary and metadata
// parsed, and what to say of a log that fails its checksums.
import type { RunInfo } from '../../src/wire.js';

export function runJson(r: RunInfo): Record<string, unknown> {
  return {
    id: r.id, project: r.project, name: r.name, group: r.group, jobType: r.jobType, tags: r.tags, notes: r.notes, mode: r.mode,
    state: r.state, stateReason: r.stateReason, exitCode: r.exitCode,
    createdAt: new Date(r.createdAt * 1000).toISOString(), finishedAt: r.finishedAt ? new Date(r.finishedAt * 1000).toISOString() : null,
    historyRows: Number(r.historyRows), writersAttached: r.writers,
    config: JSON.parse(r.configJson || '{}'), summary: JSON.parse(r.summaryJson || '{}'), metadata: JSON.parse(r.metadataJson || '{}'),
  };
}

/** What `show` and `export` say about a log that fails checksums (null: none). */
export function damageLine(j: Record<string, unknown>): string | null {
  const d = (j.metadata as { damage?: { regions: Array<{ offset: number; bytes: number }>; bytes: number; readableRows: number | null } }).damage;
  if (!d) return null;
  const where = d.regions.map((r) => `${r.bytes} bytes at offset ${r.offset}`).join(', ');
  const rows = d.readableRows !== null ? `; ${d.readableRows} of ${j.historyRows} rows can be read` : '';
  return `its log has ${d.regions.length} region(s) that fail their checksum (${where})${rows}; the rows in them are lost, everything after them is read`;
}
