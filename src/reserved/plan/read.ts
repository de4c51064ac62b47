// `ipam-shim plan`'s input files: read a file (or stdin for "-") and parse it as YAML, which JSON is a subset of.
// The parser is loaded here, on first use, from outside the bundle a CNI call starts (yaml.ts).
import { createReadStream } from 'node:fs';
import { InputError } from './inputs.js';
import { loadYaml } from './yaml.js';

/**
 * The most an input may hold: `kubectl get ciliumnodes -o yaml` of a 5,000-node cluster is ~25 MiB. Past it
 * (`--values /dev/zero`, an endless pipe) the read stops with the file named instead of filling the memory.
 */
const MAX_INPUT_BYTES = 256 * 1024 * 1024;

/** All of a file or of stdin (the operator's pipe: `kubectl get ciliumnodes -o yaml | ipam-shim plan --ciliumnodes -`), up to the bound. */
async function readAll(input: NodeJS.ReadableStream, source: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of input) {
    const b = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    size += b.length;
    if (size > MAX_INPUT_BYTES) throw new InputError(source, `larger than ${MAX_INPUT_BYTES / 1024 / 1024} MiB: not an input plan reads`);
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export interface InputFile {
  /** The path, or "stdin". */
  source: string;
  /** Every document in the file (one for JSON and most YAML; `---` separates more). */
  docs: unknown[];
}

/** Reads and parses `path` ("-": stdin). Throws InputError naming the file on a read or syntax error. */
export async function readInputFile(path: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<InputFile> {
  const source = path === '-' ? 'stdin' : path;
  let text: string;
  try {
    text = await readAll(path === '-' ? stdin : createReadStream(path), source);
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(source, `cannot read: ${(e as Error).message}`);
  }
  const { parseAllDocuments } = await loadYaml();
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text, { prettyErrors: false });
  } catch (e) {
    // The parser reports syntax as errors (below); a throw is the input's too (a nesting deeper than the stack).
    throw new InputError(source, `not YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  const all = Array.isArray(docs) ? docs : [docs];
  for (const d of all) {
    const err = d.errors[0];
    if (err) throw new InputError(source, `not YAML or JSON: ${err.message.split('\n')[0]}`);
  }
  return { source, docs: all.map((d) => toJs(d, source)).filter((d) => d !== null && d !== undefined) };
}

/**
 * The aliases a document may expand (yaml counts each expansion, nested ones multiplied): Helm values use a few
 * anchors, kubectl and az none. A billion-laughs file (nine aliases of nine aliases …) is refused long before
 * it costs memory.
 */
const MAX_ALIAS_COUNT = 100;

/**
 * A parsed document as plain values. What yaml throws here is the input's fault: an alias to no anchor, aliases
 * expanding past the bound ("Excessive alias count indicates a resource exhaustion attack"), a nesting deeper
 * than the stack.
 */
function toJs(doc: { toJS(o: { maxAliasCount: number }): unknown }, source: string): unknown {
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (e) {
    throw new InputError(source, `cannot be read as YAML: ${(e as Error).message.split('\n')[0]}`);
  }
}
