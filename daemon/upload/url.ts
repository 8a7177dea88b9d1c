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

// scheme://[user[:password]@][host[:port]][/db][?params]. Parsed by hand:
// WHATWG URL refuses the Unix-socket form `postgres://user:pw@/db?host=/dir`
// (credentials with an empty host), which the driver accepts.
const URL_RE = /^(postgres(?:ql)?):\/\/(?:([^:@/?#]*)(?::([^@/?#]*))?@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/;

export function parseStoreUrl(raw: string): StoreUrl {
  const m = URL_RE.exec(raw.trim());
  if (!m) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) && !/^postgres(ql)?:\/\//.test(raw)) {
      throw new Error(`the store URL must start with postgres:// (got ${raw.slice(0, raw.indexOf('://'))}://…); e.g. postgres://user:password@host:5432/db`);
    }
    throw new Error('the store URL is not a postgres:// URL (it must look like postgres://user:password@host:5432/db, or postgres://user:password@/db?host=/run/postgresql for a Unix socket)');
  }
  const query = new URLSearchParams(m[6]?.slice(1) ?? '');
  let password = m[3] ?? query.get('password') ?? '';
  try {
    password = decodeURIComponent(password);
  } catch {
    /* kept as written */
  }
  return { raw, shown: redactUrl(raw), password };
}

export function redactUrl(raw: string): string {
  const m = URL_RE.exec(raw.trim());
  if (!m) return '(an unparsable store URL)';
  const [, scheme, user, pw, host, db, query] = m;
  const auth = user !== undefined ? `${user}${pw !== undefined ? ':***' : ''}@` : '';
  const q = query ? query.replace(/([?&]password=)[^&]*/gi, '$1***') : '';
  return `${scheme}://${auth}${host}${db ?? ''}${q}`;
}

/** Any text with the URL's password (raw and URL-encoded) cut out. */
export function redact(text: string, url: StoreUrl | null): string {
  if (!url || !url.password) return text;
  let out = text.split(url.raw).join(url.shown);
  for (const p of new Set([url.password, encodeURIComponent(url.password)])) if (p.length >= 1) out = out.split(p).join('***');
  return out;
}
