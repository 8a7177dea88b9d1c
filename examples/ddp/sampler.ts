// Deterministic data, initial weights and a DistributedSampler look-alike for
// the DDP example. The shapes follow PyTorch exactly (shuffle per epoch from
// seed + epoch, pad to a multiple of worldSize by repeating the head, then take
// every worldSize-th index starting at rank); the permutation itself comes from
// a small seeded PRNG, not torch.randperm, so a bit-for-bit match with PyTorch
// needs the reference's --indices file.

/** mulberry32: a tiny seeded 32-bit PRNG; uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Indices one rank visits in one epoch (DistributedSampler, shuffle=True, drop_last=False). */
export function distributedSamplerIndices(n: number, worldSize: number, rank: number, seed: number, epoch: number): number[] {
  const perm = Array.from({ length: n }, (_, i) => i);
  const rand = prng(seed + epoch);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [perm[i], perm[j]] = [perm[j]!, perm[i]!];
  }
  const totalSize = Math.ceil(n / worldSize) * worldSize;
  const padded = perm.slice();
  while (padded.length < totalSize) padded.push(...perm.slice(0, totalSize - padded.length));
  const mine: number[] = [];
  for (let i = rank; i < totalSize; i += worldSize) mine.push(padded[i]!);
  return mine;
}

export interface InitialState {
  X: number[][];
  Y: number[];
  weight: number[];
  bias: number;
}

/** Same shapes as the note: X ~ N(0, 1) (samples x dims), Y in {0, 1}, Linear init U(-1/sqrt(d), 1/sqrt(d)). */
export function syntheticInitialState(samples: number, dims: number, seed: number): InitialState {
  const rand = prng(seed ^ 0x5eed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const bound = 1 / Math.sqrt(dims);
  return {
    X: Array.from({ length: samples }, () => Array.from({ length: dims }, normal)),
    Y: Array.from({ length: samples }, () => (rand() < 0.5 ? 0 : 1)),
    weight: Array.from({ length: dims }, () => (2 * rand() - 1) * bound),
    bias: (2 * rand() - 1) * bound,
  };
}
