// SVG elements from data, as dom.ts builds HTML: attributes through
// setAttribute, strings as text nodes, never parsed markup.
const NS = 'http://www.w3.org/2000/svg';

export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: Array<Node | string>): SVGElementTagNameMap[K] {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return el;
}

export function svgText(x: number, y: number, text: string, attrs: Record<string, string> = {}): SVGTextElement {
  return svg('text', { x: x.toFixed(1), y: y.toFixed(1), ...attrs }, text);
}
