// The media tab's answers: a run's histograms, images and text (every page
// the source has, thinned evenly when there are too many for one answer), and
// an image's bytes by their sha256.
import { RunNotFound, type QuerySource, type MediaItem, type RunInfo } from '../query/index.js';
import { MEDIA_KINDS, MAX_SHOWN_PIXELS, sniffImage } from '../../src/media.js';
import { attemptAt, attemptsToMarkJson } from '../../src/attempts.js';
import { HttpError } from './params.js';

/** Entries one answer holds at most; past it every other one is dropped, and again, so they stay spread over the run. */
const MAX_ENTRIES = 5000;
/** About this much JSON per answer at most (a 4096-bin histogram is some 150 kB): thinned the same way. */
const MAX_BYTES = 32 * 1024 * 1024;
const SHA256 = /^[0-9a-f]{64}$/;

/** Roughly the JSON size of an entry, without writing it. */
function sizeOf(m: MediaItem): number {
  return 160 + (m.key.length + (m.caption?.length ?? 0) + (m.text?.length ?? 0)) * 1.2 + ((m.counts?.length ?? 0) + (m.edges?.length ?? 0)) * 20;
}

const notKept = (source: QuerySource) => `histograms, images and text are not kept by this store (${source.where}) yet; \`logd media RUN\` on the node that ran it reads the node's own store`;

/**
 * GET /api/runs/{id}/media?kind=&key=: `{entries, truncated, stride}` in the
 * order they were stored (a continued run's: each with its `attempt`, and the
 * run's `attempts`). Past MAX_ENTRIES (or MAX_BYTES) only every
 * `stride`-th entry is kept: a distribution over 100 000 steps still spans
 * them all.
 */
export async function runMedia(source: QuerySource, run: RunInfo, q: URLSearchParams): Promise<unknown> {
  const kind = q.get('kind') ?? '';
  if (kind && !(MEDIA_KINDS as readonly string[]).includes(kind)) throw new HttpError(400, `kind must be one of ${MEDIA_KINDS.join(', ')}, not ${JSON.stringify(kind.slice(0, 40))}`);
  const key = q.get('key') ?? '';
  const index = (JSON.parse(run.metadataJson || '{}') as { media?: Record<string, { kind: string; count: number; lastStep: number }> }).media ?? {};
  // A continued run's entries carry the attempt that logged them (by time), and the answer lists its attempts.
  const attempts = attemptsToMarkJson(run.metadataJson);
  const base = { run: run.id, state: run.state, keys: index, ...(attempts.length ? { attempts } : {}) };
  if (!source.media) return { ...base, kept: false, why: notKept(source), entries: [], truncated: false, stride: 1 };
  let kept: Array<MediaItem & { attempt?: number }> = [];
  let bytes = 0, stride = 1, seen = 0;
  for (let after = 0; ;) {
    const page = await source.media(run.id, after, { kind: kind || undefined, key: key || undefined }).catch((e: unknown) => {
      if (e instanceof RunNotFound) throw new HttpError(404, e.message);
      throw e;
    });
    for (const m of page.entries) {
      if (seen++ % stride !== 0) continue;
      const attempt = attemptAt(attempts, m.t);
      kept.push(attempt === null ? m : { ...m, attempt });
      bytes += sizeOf(m);
      if (kept.length > MAX_ENTRIES || bytes > MAX_BYTES) {
        kept = kept.filter((_, i) => i % 2 === 0);
        bytes = kept.reduce((a, x) => a + sizeOf(x), 0);
        stride *= 2;
      }
    }
    if (!page.next) break;
    after = page.next;
  }
  return { ...base, kept: true, entries: kept, truncated: stride > 1, stride, total: seen };
}

/**
 * GET /api/runs/{id}/images/{sha256}: the bytes and the type they were checked to be; 404 for an unknown or
 * malformed sha. An image over MAX_SHOWN_PIXELS comes only with `download` (as an attachment): 422 otherwise.
 */
export async function runImage(source: QuerySource, id: string, sha: string, download = false): Promise<{ data: Uint8Array; type: string; attachment: string | null }> {
  if (!SHA256.test(sha)) throw new HttpError(404, `no image ${JSON.stringify(sha.slice(0, 80))}: an image is named by its sha256, 64 lowercase hex digits`);
  if (!source.image) throw new HttpError(404, `images are not kept by this store (${source.where}) yet`);
  const img = await source.image(id, sha).catch((e: unknown) => {
    if (e instanceof RunNotFound) throw new HttpError(404, e.message);
    throw e;
  });
  if (!img) throw new HttpError(404, `run ${id} has no image ${sha}`);
  // The store checked the bytes when they came; served as what they are, never as what a name says.
  const head = sniffImage(img.data);
  if (typeof head === 'string') throw new HttpError(500, `the stored image ${sha} is not a whole PNG or JPEG (${head})`);
  const pixels = head.width * head.height;
  if (pixels > MAX_SHOWN_PIXELS && !download) {
    throw new HttpError(422, `image ${sha} is ${head.width}x${head.height} pixels (${(pixels * 4 / 2 ** 30).toFixed(1)} GiB once decoded), more than the dashboard draws (${MAX_SHOWN_PIXELS / 2 ** 20} MP): download it with ?download=1`);
  }
  const ext = head.format === 'png' ? 'png' : 'jpg';
  return { data: img.data, type: head.format === 'png' ? 'image/png' : 'image/jpeg', attachment: download ? `${id}-${sha.slice(0, 16)}.${ext}` : null };
}
