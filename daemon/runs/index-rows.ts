// Index rows from live runs (the replayed-log variant lives in store/store.ts).
import type { RunRow } from '../store/index-db.js';
import type { LiveRun } from './run.js';
import { toJson } from '../../src/json.js';
import type { RunInfo } from '../../src/wire.js';

export function rowFromLive(run: LiveRun): RunRow {
  const i = run.info();
  return {
    id: i.id, project: i.project, name: i.name, grp: i.group, job_type: i.jobType, tags: toJson(i.tags),
    state: i.state, state_reason: i.stateReason, created_at: i.createdAt, finished_at: i.finishedAt, exit_code: i.exitCode,
    config_json: i.configJson, summary_json: i.summaryJson, metadata_json: i.metadataJson, history_rows: i.historyRows,
    mode: i.mode, notes: i.notes,
  };
}

export function infoFromRow(r: RunRow): RunInfo {
  return {
    id: r.id, project: r.project, name: r.name, group: r.grp, jobType: r.job_type, tags: JSON.parse(r.tags) as string[],
    state: r.state, stateReason: r.state_reason, createdAt: r.created_at, finishedAt: r.finished_at, exitCode: r.exit_code,
    configJson: r.config_json, summaryJson: r.summary_json, metadataJson: r.metadata_json, historyRows: r.history_rows,
    writers: 0, runToken: '', mode: r.mode, notes: r.notes, ownerWriterId: '',
  };
}
