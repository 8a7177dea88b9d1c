// The shared store's URL. Its password must never reach a log line, an error,
// `logd status` or a JSON output: everything that shows a URL or an error
// coming from the driver goes through redact().

export interface StoreUrl {
  /** As given (with the password): only for the driver. */
  raw: string;
  /** For people: the password replaced by `***`. */
  shown: string;
  password: string;
}

export function parseStoreUrl(raw: string): StoreUrl {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error(`the store URL is not a URL (it must look like postgres://user:password@host:5432/db, or postgres://user@/db?host=/run/postgresql for a Unix socket)`);
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new Error(`the store URL must start with postgres:// (got ${u.protocol}//…); e.g. postgres://user:password@host:5432/db`);
  }
  const password = decodeURIComponent(u.password);
  return { raw, shown: redactUrl(raw), password };
}

export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(an unparsable store URL)';
  }
}

/** Any text with the URL's password (raw and URL-encoded) cut out. */
export function redact(text: string, url: StoreUrl | null): string {
  if (!url || !url.password) return text;
  let out = text.split(url.raw).join(url.shown);
  for (const p of new Set([url.password, encodeURIComponent(url.password)])) if (p.length >= 1) out = out.split(p).join('***');
  return out;
}
