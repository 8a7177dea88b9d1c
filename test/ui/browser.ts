// A real Chromium (Debian's `chromium`, installed by scripts/install-system-deps.sh)
// driven through playwright-core. Never downloads a browser. The flags keep a
// headless Chromium off the network: without the background-networking ones it
// keeps calling Google services, which a closed network answers with nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';

export const CHROMIUM = process.env.LOGD_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Why browser tests cannot run here, or null when they can. */
export function chromiumMissing(): string | null {
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM}: install Debian's chromium package (scripts/install-system-deps.sh does, as root) or set LOGD_TEST_CHROMIUM`;
  return null;
}

export interface Chromium {
  browser: Browser;
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<Chromium> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ldt-chromium-'));
  // launchPersistentContext is how playwright takes a --user-data-dir of our own.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    timeout: 60_000,
    args: [
      '--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  return {
    browser: context.browser()!,
    context,
    close: async () => {
      await context.close().catch(() => {});
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}
