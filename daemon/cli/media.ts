// `logd media RUN`: a run's histograms, images and text (stored as MEDIA
// frames, images as files under the run; read through the daemon's ReadMedia
// and ReadImage). `--json` writes one JSON object per line (histograms with
// their counts and edges: what an export of them is); `--save DIR` writes the
// images out as files. From the node's store, or the shared one with
// LOGD_STORE_URL (the uploader copies media there, images as bytea).
import { shortNumber } from '../../src/number.js';
import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { openSource, type MediaItem } from '../query/index.js';
import { attemptsOf, attemptAt, attemptHeading } from './attempts.js';
import { rewindCutoffs } from '../../src/attempts.js';

interface MediaOptions { kind?: string; key?: string; json?: boolean; save?: string }

/** A file name for an image: its key with anything but [A-Za-z0-9._-] as "_", its step, rank and hash. */
export function imageFileName(m: MediaItem): string {
  const key = m.key.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^\.+/, '_').slice(0, 120);
  const rank = m.rank !== null ? `_rank${m.rank}` : '';
  return `${key}_step${m.step}${rank}_${(m.sha256 ?? '').slice(0, 12)}.${m.format === 'jpeg' ? 'jpg' : 'png'}`;
}

/** A line for people: step, rank, kind, key and what the value is, control characters escaped. */
function describe(m: MediaItem, keyWidth: number): string {
  let what: string;
  if (m.kind === 'histogram') {
    const total = (m.counts ?? []).reduce((a, b) => a + b, 0);
    const e = m.edges ?? [];
    const short = (v: number | undefined) => (typeof v === 'number' ? shortNumber(v) : v);
    what = `${m.counts?.length ?? 0} bins, ${total} values in [${short(e[0])}, ${short(e[e.length - 1])}]${m.nonfinite ? `, ${m.nonfinite} NaN/inf left out` : ''}`;
  } else if (m.kind === 'image') {
    what = m.lost ? `LOST: ${m.lost}` : `${m.width}x${m.height} ${m.format}, ${m.bytes} bytes${m.caption ? `, ${JSON.stringify(m.caption)}` : ''}`;
  } else {
    const t = m.text ?? '';
    what = JSON.stringify(t.length > 100 ? t.slice(0, 100) + '…' : t);
  }
  const rank = m.rank !== null ? String(m.rank) : '-';
  return `${String(m.step).padStart(8)}  ${rank.padStart(4)}  ${m.kind.padEnd(9)}  ${JSON.stringify(m.key).padEnd(keyWidth)}  ${what}\n`;
}

export function registerMediaCommand(program: Command, fail: (msg: string) => never): void {
  program
    .command('media')
    .description("a run's histograms, images and text, in the order they were stored")
    .argument('<run>', 'run id')
    .addOption(new Option('--kind <kind>', 'only this kind').choices(['histogram', 'image', 'text']))
    .option('--key <key>', 'only this key')
    .option('--json', 'one JSON object per line: {w, rank, key, step, t, kind, ...} (histograms with counts and edges; attempt, for a continued run, and superseded: true for an item a later attempt\'s rewind superseded)')
    .option('--save <dir>', 'write the images into this directory (made if missing), one file each')
    .action(async (id: string, o: MediaOptions) => {
      const src = await openSource().catch((e: Error) => fail(e.message));
      if (!src.media) fail(`${src.where} does not keep histograms, images or text; read them from the node's own store`);
      if (o.save) fs.mkdirSync(o.save, { recursive: true });
      // A continued run's items are marked with the attempt that logged them (by time); a run with one attempt is not.
      const info = await src.getRun(id).catch(() => null);
      const attempts = attemptsOf(info);
      // The key column as wide as the run's widest key (its media index), at most 40: the values line up.
      let keyWidth = 5;
      try {
        const idx = (JSON.parse(info?.metadataJson || '{}') as { media?: Record<string, unknown> }).media ?? {};
        keyWidth = Math.min(40, Math.max(5, ...Object.keys(idx).map((k) => JSON.stringify(k).length)));
      } catch {
        /* no index: the default width */
      }
      // After a rewind (init(resume_from=...)), an earlier attempt's items above the step resumed from are superseded.
      const cut = rewindCutoffs(attempts);
      let shownAttempt: number | null = null;
      let n = 0;
      let saved = 0;
      if (!o.json) process.stdout.write(`${'step'.padStart(8)}  rank  kind       ${'key'.padEnd(keyWidth)}  value\n`);
      for (let after = 0; ;) {
        const page = await src.media!(id, after, { kind: o.kind, key: o.key }).catch((e: Error) => fail(e.message));
        const out: string[] = [];
        for (const m of page.entries) {
          n++;
          const attempt = attemptAt(attempts, m.t);
          const superseded = attempt !== null && m.step > (cut[attempt] ?? Infinity);
          if (o.json) out.push(JSON.stringify(attempt === null ? m : { ...m, attempt, ...(superseded ? { superseded } : {}) }) + '\n');
          else {
            if (attempt !== null && attempt !== shownAttempt) out.push(attemptHeading(attempts, (shownAttempt = attempt)) + '\n');
            const line = describe(m, keyWidth);
            out.push(superseded ? line.replace(/\n$/, "  (superseded: a later attempt resumed from an earlier step)\n") : line);
          }
          if (o.save && m.kind === 'image' && m.sha256) {
            const img = await src.image!(id, m.sha256).catch((e: Error) => fail(e.message));
            if (!img) continue;
            fs.writeFileSync(path.join(o.save, imageFileName(m)), img.data);
            saved++;
          }
        }
        process.stdout.write(out.join(''));
        if (!page.next) break;
        after = page.next;
      }
      if (o.save) process.stderr.write(`logd media: wrote ${saved} image(s) into ${o.save}\n`);
      if (n === 0 && !o.json) process.stderr.write(`logd media: run ${id} has no ${o.kind ?? 'histograms, images or text'}${o.key ? ` under ${JSON.stringify(o.key)}` : ''}\n`);
      await src.close();
    });
}
