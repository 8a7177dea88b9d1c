// Saved views of the local store: views.json in the node's data dir (mode
// 0600, written to a temporary name and renamed, so a crash leaves the old
// file or the new one). Several `logd ui` processes may share it: each save
// reads the file again first.
import fs from 'node:fs';
import path from 'node:path';
import { BadView, MAX_VIEWS, type SavedView, type ViewStore } from './views.js';

export class FileViews implements ViewStore {
  readonly where: string;
  private readonly file: string;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, 'views.json');
    this.where = `${this.file}`;
  }

  async list(): Promise<SavedView[]> {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new Error(`cannot read the saved views in ${this.file}: ${(e as Error).message}`);
    }
    try {
      const parsed = JSON.parse(text) as { views?: SavedView[] };
      return (parsed.views ?? []).filter((v) => v && typeof v.name === 'string' && typeof v.url === 'string');
    } catch (e) {
      throw new Error(`the saved views in ${this.file} are not JSON (${(e as Error).message}); move the file away to start afresh`);
    }
  }

  async save(view: { name: string; url: string }): Promise<SavedView> {
    const views = (await this.list()).filter((v) => v.name !== view.name);
    if (views.length >= MAX_VIEWS) throw new BadView(`${MAX_VIEWS} views are saved already; delete some first`);
    const saved = { ...view, savedAt: new Date().toISOString() };
    this.write([...views, saved]);
    return saved;
  }

  async remove(name: string): Promise<boolean> {
    const views = await this.list();
    const left = views.filter((v) => v.name !== name);
    if (left.length === views.length) return false;
    this.write(left);
    return true;
  }

  private write(views: SavedView[]): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    try {
      fs.writeFileSync(tmp, JSON.stringify({ views }, null, 1) + '\n', { mode: 0o600 });
      fs.renameSync(tmp, this.file);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw new Error(`cannot save the view in ${this.file}: ${(e as Error).message}`);
    }
  }
}
