// Option resolution and the unavailable-addon contract: pure TS, runs everywhere.
import { describe, expect, it } from 'vitest';
import { buildInfo, initProcessGroup, InvalidArgumentError, isAvailable, loadError, NotSupportedError, resolveInitOptions } from '../../native/index.js';

describe('resolveInitOptions', () => {
  it('env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE like torchrun', () => {
    const env = { MASTER_ADDR: 'node0', MASTER_PORT: '29501', RANK: '3', WORLD_SIZE: '8' };
    expect(resolveInitOptions({ backend: 'gloo', timeoutMs: 1000 }, env)).toEqual({
      backend: 'gloo', rank: 3, worldSize: 8, storeKind: 'tcp', host: 'node0', port: 29501, path: null, timeoutMs: 1000, checkCollectives: true,
      localRank: 3,
    });
    expect(resolveInitOptions({ backend: 'gloo' }, { ...env, LOCAL_RANK: '1' }).localRank).toBe(1);
  });

  it('explicit rank/worldSize win over the environment; LOGD_CHECK_COLLECTIVES=0 turns the check off', () => {
    const env = { MASTER_ADDR: 'h', MASTER_PORT: '1', RANK: '3', WORLD_SIZE: '8', LOGD_CHECK_COLLECTIVES: '0' };
    expect(resolveInitOptions({ backend: 'gloo', rank: 1, worldSize: 2 }, env)).toMatchObject({ rank: 1, worldSize: 2, checkCollectives: false, timeoutMs: 600000 });
  });

  it('tcp:// and file:// need rank and worldSize in the options', () => {
    expect(resolveInitOptions({ backend: 'gloo', initMethod: 'tcp://10.0.0.1:2345', rank: 0, worldSize: 2 }, {})).toMatchObject({ storeKind: 'tcp', host: '10.0.0.1', port: 2345 });
    expect(resolveInitOptions({ backend: 'gloo', initMethod: 'file:///tmp/logd-store', rank: 1, worldSize: 2 }, {})).toMatchObject({ storeKind: 'file', path: '/tmp/logd-store', host: null, port: null });
    expect(() => resolveInitOptions({ backend: 'gloo', initMethod: 'tcp://h:1', worldSize: 2 }, {})).toThrow(/rank must be a non-negative integer; pass it in the options/);
  });

  it('says what to set when something is missing or wrong', () => {
    expect(() => resolveInitOptions({ backend: 'gloo' }, {})).toThrow(InvalidArgumentError);
    expect(() => resolveInitOptions({ backend: 'gloo' }, {})).toThrow(/MASTER_ADDR/);
    expect(() => resolveInitOptions({ backend: 'gloo' }, { MASTER_ADDR: 'h', MASTER_PORT: '1', WORLD_SIZE: '2' })).toThrow(/set RANK/);
    expect(() => resolveInitOptions({ backend: 'gloo', initMethod: 'udp://x' }, {})).toThrow(/env:\/\/, tcp:\/\/host:port or file:\/\/\/path/);
    expect(() => resolveInitOptions({ backend: 'gloo', initMethod: 'tcp://h:1', rank: 2, worldSize: 2 }, {})).toThrow(/rank 2 is outside 0..1/);
    expect(() => resolveInitOptions({ backend: 'mpi' as never }, {})).toThrow(/'gloo' or 'nccl'/);
  });
});

describe('availability', () => {
  it('loadError is null exactly when the addon loaded, and otherwise says what to install', () => {
    if (isAvailable()) expect(loadError()).toBeNull();
    else expect(loadError()).toMatch(/apt-get install libtorch-dev libgloo-dev.*make native/);
  });

  it.skipIf(!isAvailable())('nccl without a CUDA build rejects with NotSupportedError and says what to do', async () => {
    if (buildInfo().backends.includes('nccl')) return; // CUDA build: covered by the GPU run
    const err = await initProcessGroup({ backend: 'nccl', initMethod: 'tcp://127.0.0.1:1', rank: 0, worldSize: 1, timeoutMs: 2000 }).catch((e) => e);
    expect(err).toBeInstanceOf(NotSupportedError);
    expect(err.message).toMatch(/use backend 'gloo'/i);
    expect(err.stack).toContain('options.test.ts'); // the caller's frame, captured before the async call
  });
});
