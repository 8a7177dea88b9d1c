// mode: 'disabled': the same surface, every call a cheap no-op, no daemon.
import type { FinishResult, LogOptions } from './run.js';

const noop = () => {};

export class DisabledRun {
  readonly id = 'disabled';
  readonly name: string;
  readonly project: string;
  readonly group: string;
  readonly config = { update: noop as (o: Record<string, unknown>) => void, get: (_k: string): unknown => undefined, toJSON: () => ({}) };
  readonly summary = { update: noop as (o: Record<string, unknown>) => void, toJSON: () => ({}) };
  constructor(opts: { name?: string; project?: string; group?: string }) {
    this.name = opts.name ?? 'disabled';
    this.project = opts.project ?? 'default';
    this.group = opts.group ?? '';
  }
  log(_data: Record<string, unknown>, _opts?: LogOptions): void {}
  handle(): string {
    return '';
  }
  async alert(_title: string, _opts: { text?: string; level?: 'info' | 'warn' | 'error' } = {}): Promise<boolean> {
    return false;
  }

  async flush(): Promise<boolean> {
    return true;
  }
  async finish(): Promise<FinishResult> {
    return { state: 'finished', message: '', timedOut: false };
  }
}
