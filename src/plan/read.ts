// `ipam-shim plan`'s input files: read a file (or stdin for "-") and parse it as YAML, which JSON is a subset of.
// The parser is loaded here, on first use, from outside the bundle a CNI call starts (src/plan/yaml.ts).
import { readFile } from 'node:fs/promises';
import { InputError } from './inputs.js';
import { loadYaml } from './yaml.js';

/** Reads all of stdin (the operator's pipe: `kubectl get ciliumnodes -o yaml | ipam-shim plan --ciliumnodes -`). */
async function readStdin(stdin: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
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
    text = path === '-' ? await readStdin(stdin) : await readFile(path, 'utf8');
  } catch (e) {
    throw new InputError(source, `cannot read: ${(e as Error).message}`);
  }
  const { parseAllDocuments } = await loadYaml();
  const docs = parseAllDocuments(text, { prettyErrors: false });
  const all = Array.isArray(docs) ? docs : [docs];
  for (const d of all) {
    const err = d.errors[0];
    if (err) throw new InputError(source, `not YAML or JSON: ${err.message.split('\n')[0]}`);
  }
  return { source, docs: all.map((d) => d.toJS({ maxAliasCount: 100 }) as unknown).filter((d) => d !== null && d !== undefined) };
}
