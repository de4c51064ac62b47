// PURE text surgery on a conflist: put the shim's chained entry right after the allocating plugin
// (cilium-cni), update it, or take it out, touching no other byte. The file is never re-serialised: the JSON
// is scanned for the spans of the `plugins` elements and only our element (with its separator) is spliced in
// or out, in the file's own indentation, line endings and spacing. Insert-then-remove gives back the
// original bytes exactly.
import { PLUGIN_TYPE, shimPlacement } from '../cni/config.js';
import { ANCHOR_TYPE } from '../conflist.js';
import { isObject } from '../cni/json.js';

/**
 * A conflist install cannot edit; the message says why. No caller branches on the reason: install reports the
 * file as unreadable (install/conflist.ts) or skips it (install.ts uninstall), whatever it is.
 */
export class ConflistEditError extends Error {
  override name = 'ConflistEditError';
}

interface Span {
  start: number;
  /** Exclusive. */
  end: number;
}

interface PluginSlot {
  span: Span;
  value: unknown;
  type: string | undefined;
}

export interface ConflistShape {
  list: Record<string, unknown>;
  plugins: PluginSlot[];
  /** Span of the `plugins` array itself (brackets included). */
  pluginsSpan: Span;
  /** Index of the first plugin of the anchor type (cilium-cni), or -1. */
  anchor: number;
  /** Indexes of chained shim entries (`"type": "ipam-shim"`). */
  chained: number[];
  /** Index of a plugin whose `ipam.type` is the shim (the IPAM slot), or -1. */
  ipamSlot: number;
}

export type UpsertAction = 'inserted' | 'updated' | 'moved' | 'unchanged' | 'ipam-slot';

export interface UpsertResult {
  text: string;
  action: UpsertAction;
  changed: boolean;
  /** Where the shim's entry is now. */
  index: number;
}

export interface RemoveResult {
  text: string;
  changed: boolean;
  /** How many chained shim entries were taken out. */
  removed: number;
  /** The shim still sits in a plugin's IPAM slot (not ours to remove). */
  ipamSlotLeft: boolean;
}

// ---------------------------------------------------------------------------------------------------------------
// scanning (the text is known to be valid JSON: JSON.parse ran first)

class Scanner {
  constructor(private readonly s: string) {}

  ws(i: number): number {
    while (i < this.s.length && ' \t\r\n'.includes(this.s[i]!)) i++;
    return i;
  }

  /** End (exclusive) of the value starting at i (i at its first character). */
  value(i: number): number {
    const c = this.s[i];
    if (c === '"') return this.string(i);
    if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      let j = this.ws(i + 1);
      if (this.s[j] === close) return j + 1;
      for (;;) {
        if (c === '{') {
          j = this.string(j);
          j = this.ws(j);
          j = this.ws(j + 1); // ':'
        }
        j = this.ws(this.value(j));
        if (this.s[j] === ',') {
          j = this.ws(j + 1);
          continue;
        }
        return j + 1; // the closing bracket
      }
    }
    let j = i;
    while (j < this.s.length && !',]} \t\r\n'.includes(this.s[j]!)) j++;
    return j;
  }

  string(i: number): number {
    let j = i + 1;
    while (this.s[j] !== '"') j += this.s[j] === '\\' ? 2 : 1;
    return j + 1;
  }

  /** Members of the object at i: key text and value span. */
  members(i: number): Array<{ key: string; value: Span }> {
    const out: Array<{ key: string; value: Span }> = [];
    let j = this.ws(i + 1);
    if (this.s[j] === '}') return out;
    for (;;) {
      const keyEnd = this.string(j);
      const key = JSON.parse(this.s.slice(j, keyEnd)) as string;
      j = this.ws(this.ws(keyEnd) + 1);
      const end = this.value(j);
      out.push({ key, value: { start: j, end } });
      j = this.ws(end);
      if (this.s[j] === ',') {
        j = this.ws(j + 1);
        continue;
      }
      return out;
    }
  }

  /** Element spans of the array at i. */
  elements(i: number): Span[] {
    const out: Span[] = [];
    let j = this.ws(i + 1);
    if (this.s[j] === ']') return out;
    for (;;) {
      const end = this.value(j);
      out.push({ start: j, end });
      j = this.ws(end);
      if (this.s[j] === ',') {
        j = this.ws(j + 1);
        continue;
      }
      return out;
    }
  }
}

/** Parses a conflist and locates its plugins. Throws ConflistEditError for anything that is not one. */
export function inspectConflist(text: string, anchorType = ANCHOR_TYPE): ConflistShape {
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (e) {
    throw new ConflistEditError(`not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(list)) throw new ConflistEditError('not a JSON object');
  if (!Array.isArray(list.plugins)) throw new ConflistEditError('no "plugins" array: a single-plugin .conf cannot chain the shim');
  const sc = new Scanner(text);
  const top = sc.ws(0);
  // JSON.parse keeps the last of duplicate keys; so do we.
  const member = sc
    .members(top)
    .filter((m) => m.key === 'plugins')
    .at(-1)!;
  const spans = sc.elements(member.value.start);
  const values = list.plugins as unknown[];
  if (spans.length !== values.length) throw new ConflistEditError('internal: plugin spans do not match the parsed list');
  const plugins = spans.map((span, i) => {
    const value = values[i];
    return { span, value, type: isObject(value) && typeof value.type === 'string' ? value.type : undefined };
  });
  const chained = plugins.flatMap((p, i) => (shimPlacement(p.value) === 'chained' ? [i] : []));
  const ipamSlot = plugins.findIndex((p) => shimPlacement(p.value) === 'ipam');
  return { list, plugins, pluginsSpan: member.value, anchor: plugins.findIndex((p) => p.type === anchorType), chained, ipamSlot };
}

// ---------------------------------------------------------------------------------------------------------------
// formatting in the file's own style

interface Style {
  eol: string;
  /** Whitespace between the previous delimiter (`[` or `,`) and an element. */
  sep: string;
  /** Leading whitespace of the element's first line. */
  indent: string;
  /** One level of indentation inside the element; undefined = the element is written on one line. */
  unit: string | undefined;
  colon: string;
  comma: string;
}

function styleAt(text: string, shape: ConflistShape, i: number): Style {
  const { span } = shape.plugins[i]!;
  // The whitespace that separates elements: the one before element i, or (for the first element, which
  // follows "[" rather than ",") the one before the second element when there is one.
  const model = i === 0 && shape.plugins.length > 1 ? 1 : i;
  const delim = model === 0 ? shape.pluginsSpan.start : text.lastIndexOf(',', shape.plugins[model]!.span.start);
  let sep = text.slice(delim + 1, shape.plugins[model]!.span.start);
  const lineStart = text.lastIndexOf('\n', span.start - 1) + 1;
  const lead = text.slice(lineStart, span.start);
  const indent = /^[ \t]*$/.test(lead) ? lead : '';
  const body = text.slice(span.start, span.end);
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  let unit: string | undefined;
  if (body.includes('\n')) {
    const second = body.split('\n')[1] ?? '';
    const inner = /^[ \t]*/.exec(second)![0];
    unit = inner.startsWith(indent) && inner.length > indent.length ? inner.slice(indent.length) : inner.includes('\t') ? '\t' : '  ';
  }
  const comma = /,\s/.test(body) ? ', ' : ',';
  if (model === 0 && !sep.includes('\n')) sep = comma.slice(1);
  return { eol, sep, indent, unit, colon: /"\s*:\s/.test(body) ? ': ' : ':', comma };
}

function compact(v: unknown, st: Style): string {
  if (Array.isArray(v)) return `[${v.map((x) => compact(x, st)).join(st.comma)}]`;
  if (isObject(v))
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}${st.colon}${compact(x, st)}`)
      .join(st.comma)}}`;
  return JSON.stringify(v);
}

function formatEntry(entry: Record<string, unknown>, st: Style): string {
  if (st.unit === undefined) return compact(entry, st);
  return JSON.stringify(entry, null, st.unit).split('\n').join(`${st.eol}${st.indent}`);
}

// ---------------------------------------------------------------------------------------------------------------
// edits

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

function removeAt(text: string, shape: ConflistShape, i: number): string {
  const { span } = shape.plugins[i]!;
  if (i > 0) return text.slice(0, shape.plugins[i - 1]!.span.end) + text.slice(span.end);
  const next = shape.plugins[1];
  return text.slice(0, span.start) + text.slice(next ? next.span.start : span.end);
}

function insertAfter(text: string, shape: ConflistShape, i: number, entry: Record<string, unknown>): string {
  const st = styleAt(text, shape, i);
  const at = shape.plugins[i]!.span.end;
  return `${text.slice(0, at)},${st.sep}${formatEntry(entry, st)}${text.slice(at)}`;
}

/**
 * Makes the conflist hold exactly one chained shim entry equal to `entry`, right after the first plugin of
 * type `anchorType`. Unchanged text when it already does (idempotent). When the shim already sits in a
 * plugin's IPAM slot, nothing is changed (`ipam-slot`): that placement is the operator's choice.
 */
export function upsertShimEntry(text: string, entry: Record<string, unknown>, anchorType = ANCHOR_TYPE): UpsertResult {
  if (entry.type !== PLUGIN_TYPE) throw new ConflistEditError(`the entry's type must be "${PLUGIN_TYPE}"`);
  let shape = inspectConflist(text, anchorType);
  if (shape.ipamSlot >= 0) return { text, action: 'ipam-slot', changed: false, index: shape.ipamSlot };
  if (shape.anchor < 0) throw new ConflistEditError(`no "${anchorType}" plugin in the list: nothing to chain the shim after`);
  const want = shape.anchor + 1;
  const exact = shape.chained.length === 1 && shape.chained[0] === want;
  if (exact) {
    if (deepEqual(shape.plugins[want]!.value, entry)) return { text, action: 'unchanged', changed: false, index: want };
    const st = styleAt(text, shape, want);
    const { span } = shape.plugins[want]!;
    return { text: text.slice(0, span.start) + formatEntry(entry, st) + text.slice(span.end), action: 'updated', changed: true, index: want };
  }
  const hadAny = shape.chained.length > 0;
  // Take every misplaced or duplicate entry out, then insert.
  ({ text, shape } = removeAll(text, shape, anchorType));
  const out = insertAfter(text, shape, shape.anchor, entry);
  return { text: out, action: hadAny ? 'moved' : 'inserted', changed: true, index: shape.anchor + 1 };
}

/** Removes chained shim entries one at a time, re-scanning after each (spans move). */
function removeAll(text: string, shape: ConflistShape, anchorType: string): { text: string; shape: ConflistShape } {
  while (shape.chained.length) {
    text = removeAt(text, shape, shape.chained.at(-1)!);
    shape = inspectConflist(text, anchorType);
  }
  return { text, shape };
}

/** Takes every chained shim entry out, and nothing else. */
export function removeShimEntry(text: string): RemoveResult {
  const shape = inspectConflist(text);
  const out = removeAll(text, shape, ANCHOR_TYPE);
  return { text: out.text, changed: shape.chained.length > 0, removed: shape.chained.length, ipamSlotLeft: shape.ipamSlot >= 0 };
}
