// The YAML parser for `plan`'s input files, kept out of the bundle every CNI call starts: the build writes the
// yaml package as a file of its own (dist/ipam-shim-yaml.js, and an asset of the single executable,
// scripts/build.mjs), loaded here on first use. Run from the sources (tests, tsx), it is the package itself.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as Yaml from 'yaml';

const FILE = 'ipam-shim-yaml.js';

/** The yaml package's exports. */
export async function loadYaml(): Promise<typeof Yaml> {
  // The build defines IPAM_SHIM_VERSION; the sources do not (and there `yaml` resolves in node_modules).
  if (process.env.IPAM_SHIM_VERSION === undefined) return import('yaml');
  const sea = process.getBuiltinModule('node:sea');
  const source = sea?.isSea() ? sea.getAsset(FILE, 'utf8') : readFileSync(join(__dirname, FILE), 'utf8');
  const { runInThisContext } = process.getBuiltinModule('node:vm');
  // A CommonJS module (esbuild's output) whose only requires are Node's built-ins.
  const load = runInThisContext(`(function (module, exports, require) {${source}\n})`, { filename: FILE }) as (
    m: { exports: unknown },
    e: unknown,
    r: (id: string) => unknown,
  ) => void;
  const m: { exports: unknown } = { exports: {} };
  load(m, m.exports, (id) => process.getBuiltinModule(id));
  return m.exports as typeof Yaml;
}
