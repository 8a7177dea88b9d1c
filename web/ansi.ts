// Colours in console output: a line's SGR escape codes (ESC [ … m) read into
// segments of text with a colour and weight, for the Logs tab to build as
// spans (textContent, never HTML). Understood: reset (0 or none), bold (1;
// 22 ends it), foreground 30–37 and 90–97 (39: default). Other SGR codes
// (backgrounds, 256-colour and RGB with their arguments) and other CSI
// sequences (cursor moves, erase) are dropped. No DOM: tested in Node.

export interface Segment {
  text: string;
  /** 0–7: 30–37, 8–15: 90–97; null: the default colour. */
  fg: number | null;
  bold: boolean;
}

// eslint-disable-next-line no-control-regex
const CSI = /\x1b\[([0-9;?]*)([ -/]*[@-~])/g;

/** The text a line shows, escape sequences left out (what a search matches). */
export function plainText(line: string): string {
  return line.replace(CSI, '');
}

export function sgrSegments(line: string): Segment[] {
  const out: Segment[] = [];
  let fg: number | null = null, bold = false, at = 0;
  const push = (text: string) => {
    if (!text) return;
    const last = out[out.length - 1];
    if (last && last.fg === fg && last.bold === bold) last.text += text;
    else out.push({ text, fg, bold });
  };
  CSI.lastIndex = 0;
  for (let m = CSI.exec(line); m; m = CSI.exec(line)) {
    push(line.slice(at, m.index));
    at = m.index + m[0].length;
    if (m[2] !== 'm') continue;
    const codes = m[1] === '' ? [0] : m[1].split(';').map((c) => (c === '' ? 0 : Number(c)));
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i];
      if (c === 0) (fg = null), (bold = false);
      else if (c === 1) bold = true;
      else if (c === 22) bold = false;
      else if (c >= 30 && c <= 37) fg = c - 30;
      else if (c >= 90 && c <= 97) fg = c - 90 + 8;
      else if (c === 39) fg = null;
      else if (c === 38 || c === 48) i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0; // extended colours: their arguments are no codes
    }
  }
  push(line.slice(at));
  return out;
}
