// Managing runs after they were made (`logd rename`, `logd tag`, `logd note`, `logd rm`): an edit of a run's
// listing fields is an EDIT frame in its log (so an index rebuild and the uploader keep it) and its index row;
// a removal takes the run's directory and index row away. A running run can be edited (its owner is not told:
// the fields are the daemon's) but not removed.
import { FrameType, jsonFrame, type RunEdit } from '../store/format.js';
import { invalid, notFound, failedPrecondition } from '../../src/errors.js';
import { checkRunId, checkLabel } from '../../src/names.js';
import type { RunInfo } from '../../src/wire.js';
import { rowFromLive, infoFromRow } from './index-rows.js';
import type { Registry } from './registry.js';

/** The longest notes a run keeps (bytes of UTF-8). */
export const MAX_NOTES_BYTES = 64 * 1024;
/** The most tags a run carries. */
export const MAX_TAGS = 256;

export interface EditAsk {
  name?: string;
  addTags?: string[];
  removeTags?: string[];
  notes?: string;
}

function mustExist(reg: Registry, id: string): void {
  const bad = checkRunId(id);
  if (bad) throw invalid(bad);
  if (!reg.runs.has(id) && !reg.store.exists(id)) throw notFound(`run ${JSON.stringify(id.slice(0, 80))} does not exist in ${reg.store.dataDir}; list runs with \`logd runs\``);
}

/** Renames, tags or notes a run; answers with its info as it is now. */
export async function editRun(reg: Registry, id: string, ask: EditAsk): Promise<RunInfo> {
  mustExist(reg, id);
  if (ask.name !== undefined) {
    if (ask.name.trim() === '') throw invalid('a run\'s name cannot be empty');
    const bad = checkLabel('name', ask.name);
    if (bad) throw invalid(bad);
  }
  for (const t of [...(ask.addTags ?? []), ...(ask.removeTags ?? [])]) {
    const bad = t === '' ? 'a tag cannot be empty' : checkLabel('tag', t);
    if (bad) throw invalid(bad);
  }
  if (ask.notes !== undefined) {
    if (Buffer.byteLength(ask.notes) > MAX_NOTES_BYTES) throw invalid(`notes of ${Buffer.byteLength(ask.notes)} bytes: a run keeps at most ${MAX_NOTES_BYTES}`);
    if ((ask.notes as { isWellFormed?: () => boolean }).isWellFormed?.() === false) throw invalid('notes are not valid UTF-8 (a lone surrogate)');
  }
  const live = reg.runs.get(id);
  const row = live ? null : reg.store.index.get(id);
  if (!live && !row) throw notFound(`run ${id} is not in ${reg.store.dataDir}'s index; \`logd runs\` lists the runs it has`);
  const now = live ? { name: live.meta.name, tags: live.meta.tags, notes: live.meta.notes } : { name: row!.name, tags: JSON.parse(row!.tags || '[]') as string[], notes: row!.notes };
  const edit: RunEdit = { at: Date.now() / 1000 };
  if (ask.name !== undefined && ask.name !== now.name) edit.name = ask.name;
  if (ask.addTags?.length || ask.removeTags?.length) {
    const drop = new Set(ask.removeTags ?? []);
    const tags = [...new Set([...now.tags.filter((t) => !drop.has(t)), ...(ask.addTags ?? []).filter((t) => !drop.has(t))])];
    if (tags.length > MAX_TAGS) throw invalid(`a run carries at most ${MAX_TAGS} tags; this edit would give it ${tags.length}`);
    if (tags.join('\u0000') !== now.tags.join('\u0000')) edit.tags = tags;
  }
  if (ask.notes !== undefined && ask.notes !== now.notes) edit.notes = ask.notes;
  if (Object.keys(edit).length > 1) {
    const frame = jsonFrame(edit);
    let appended = false;
    if (live && !live.log.closed) {
      live.log.append(FrameType.EDIT, frame);
      await live.log.sync();
      appended = true;
    }
    if (!appended) await reg.store.appendToClosed(id, FrameType.EDIT, frame);
    const fields = { ...(edit.name !== undefined ? { name: edit.name } : {}), ...(edit.tags ? { tags: edit.tags } : {}), ...(edit.notes !== undefined ? { notes: edit.notes } : {}) };
    const current = reg.runs.get(id);
    if (current) {
      Object.assign(current.meta, fields);
      reg.store.index.upsert(rowFromLive(current));
    } else {
      const r = reg.store.index.get(id)!;
      reg.store.index.upsert({ ...r, ...(edit.name !== undefined ? { name: edit.name } : {}), ...(edit.tags ? { tags: JSON.stringify(edit.tags) } : {}), ...(edit.notes !== undefined ? { notes: edit.notes } : {}) });
    }
    reg.continued.add(id); // the uploader looks at the run again, though it had uploaded it whole
    reg.log(`server: run ${id} edited: ${Object.keys(fields).join(', ')}`);
  }
  const after = reg.runs.get(id);
  return after ? after.info() : infoFromRow(reg.store.index.get(id)!);
}

/** Removes a run that is not running: its log, media, index row. The shared store keeps its copy (`logd rm --store`). */
export async function removeRun(reg: Registry, id: string): Promise<void> {
  mustExist(reg, id);
  const live = reg.runs.get(id);
  if (live && !live.final) {
    throw failedPrecondition(`run ${id} is ${live.state}: it can be removed once it has ended (finish it, or stop its process)`);
  }
  await reg.store.sealed(id);
  if (live) reg.runs.delete(id);
  reg.store.removeRun(id);
  reg.log(`server: run ${id} removed (logd rm)`);
}
