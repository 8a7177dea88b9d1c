// The record log on its own: frames round-trip, a torn or corrupt tail is cut
// (and kept aside first) and never served, a damaged frame in the middle is
// skipped and reading goes on, a failed write leaves no half frame behind.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RecordLog } from '../dist/daemon/store/record-log.js';
import { scanFrames } from '../dist/src/frames.js';
import { encodeHistory, decodeHistory, FrameType } from '../dist/daemon/store/format.js';

const dirs: string[] = [];
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'ldstore-'));
  dirs.push(d);
  return path.join(d, 'records.log');
}
afterEach(() => dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const bytes = (a: Float64Array | Uint32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

describe('record log', () => {
  it('history frames round-trip through the file', async () => {
    const file = tmp();
    const { log } = RecordLog.open(file);
    log.append(FrameType.HISTORY, encodeHistory({
      writerIdx: 2, seq: 7, rows: 2,
      steps: bytes(new Float64Array([10, 11])), times: bytes(new Float64Array([1.5, 2.5])),
      values: bytes(new Float64Array([NaN, 3, -Infinity])), counts: bytes(new Uint32Array([2, 1])), keyIds: bytes(new Uint32Array([0, 1, 0])),
    }));
    await log.sync();
    log.close();
    const got: ReturnType<typeof decodeHistory>[] = [];
    const scan = scanFrames(file, (type, p) => type === FrameType.HISTORY && got.push(decodeHistory(p)));
    expect(scan).toMatchObject({ frames: 1, tornBytes: 0 });
    expect(got[0]).toMatchObject({ writerIdx: 2, seq: 7, rows: 2 });
    expect([...got[0].steps]).toEqual([10, 11]);
    expect([...got[0].values]).toEqual([NaN, 3, -Infinity]);
    expect([...got[0].counts]).toEqual([2, 1]);
  });

  it('cuts a torn tail and a corrupt frame, keeping every whole frame before them', async () => {
    const file = tmp();
    const { log } = RecordLog.open(file);
    for (let i = 0; i < 5; i++) log.append(FrameType.SUMMARY, [Buffer.from(JSON.stringify({ i }))]);
    await log.sync();
    log.close();
    const whole = fs.statSync(file).size;
    // Half a frame at the end, as a crash mid-write leaves it.
    fs.appendFileSync(file, Buffer.from([0x20, 0, 0, 0, 9, 9, 9, 9, 5, 1, 2]));
    const seen: string[] = [];
    const reopened = RecordLog.open(file, (_t, p) => seen.push(Buffer.from(p).toString()));
    expect(reopened.scan).toMatchObject({ frames: 5, validBytes: whole });
    expect(fs.statSync(file).size).toBe(whole);
    expect(seen).toEqual([0, 1, 2, 3, 4].map((i) => JSON.stringify({ i })));
    // A flipped byte inside the last frame: that frame and everything after it go.
    reopened.log.close();
    const buf = fs.readFileSync(file);
    buf[buf.length - 3] ^= 0xff;
    fs.writeFileSync(file, buf);
    const again = RecordLog.open(file);
    expect(again.scan.frames).toBe(4);
    again.log.close();
    // Every cut byte was kept aside first, named by the offset it was cut at.
    const cutAt = whole - (buf.length - fs.statSync(file).size);
    expect(fs.statSync(file).size).toBeLessThan(whole);
    expect(fs.readFileSync(`${file}.cut-${whole}`)).toEqual(Buffer.from([0x20, 0, 0, 0, 9, 9, 9, 9, 5, 1, 2]));
    expect(fs.readFileSync(`${file}.cut-${cutAt}`)).toEqual(buf.subarray(cutAt));
  });

  it('issue 9 case 3: a damaged frame in the middle is skipped, the frames after it are read, nothing is cut', async () => {
    const file = tmp();
    const { log } = RecordLog.open(file);
    for (let i = 0; i < 9; i++) log.append(FrameType.SUMMARY, [Buffer.from(JSON.stringify({ i, pad: 'x'.repeat(40 + i) }))]);
    await log.sync();
    log.close();
    const size = fs.statSync(file).size;
    const frames: number[] = [];
    scanFrames(file, (_t, _p, offset) => frames.push(offset));
    // One flipped byte in frame 4's payload, and frame 6's length field made garbage.
    const buf = fs.readFileSync(file);
    buf[frames[4] + 20] ^= 0x01;
    buf.writeUInt32LE(0x7fffff00, frames[6]);
    fs.writeFileSync(file, buf);
    const seen: number[] = [];
    const reopened = RecordLog.open(file, (_t, p) => seen.push(JSON.parse(Buffer.from(p).toString()).i));
    reopened.log.close();
    expect(seen).toEqual([0, 1, 2, 3, 5, 7, 8]);
    expect(reopened.scan.damaged).toEqual([
      { offset: frames[4], bytes: frames[5] - frames[4] },
      { offset: frames[6], bytes: frames[7] - frames[6] },
    ]);
    expect(reopened.scan).toMatchObject({ tornBytes: 0, validBytes: size, frames: 7 });
    expect(fs.statSync(file).size).toBe(size);
    expect(fs.readdirSync(path.dirname(file)).filter((n) => n.includes('.cut-'))).toEqual([]);
  });

  it('appends after recovery continue the log', async () => {
    const file = tmp();
    const a = RecordLog.open(file).log;
    a.append(FrameType.CONFIG, [Buffer.from('{"a":1}')]);
    await a.sync();
    a.close();
    fs.appendFileSync(file, Buffer.from([1, 2, 3]));
    const b = RecordLog.open(file).log;
    b.append(FrameType.CONFIG, [Buffer.from('{"b":2}')]);
    await b.sync();
    b.close();
    const seen: string[] = [];
    expect(scanFrames(file, (_t, p) => seen.push(Buffer.from(p).toString())).tornBytes).toBe(0);
    expect(seen).toEqual(['{"a":1}', '{"b":2}']);
  });
});
