// The single executable's V8 startup snapshot (scripts/build.mjs, sea-config `useSnapshot`): at build time, fill
// it by running src/warm.ts and name the function each invocation starts in. Only the bundle the snapshot is built
// from has IPAM_SHIM_SNAPSHOT_ENTRY set: node:v8 loads the stream machinery, which the plain bundle must not pay
// for on every call.
//
// The warm-up runs regular expressions: compiled to machine code (V8 tiers a regexp up after one run) they cannot
// be serialized and the build aborts; interpreted (bytecode) they can, and tier up at run time. The flags go back
// before serializing (--regexp-interpret-all also turned off --regexp-tier-up): a snapshot records the flags it
// was built with and refuses to load under others.

/** True when this process builds the snapshot: then `main` runs in each invocation started from it, not now. */
export function buildingSnapshot(main: () => void): boolean {
  if (process.env.IPAM_SHIM_SNAPSHOT_ENTRY !== '1' || !process.getBuiltinModule('node:v8').startupSnapshot.isBuildingSnapshot()) return false;
  const { startupSnapshot, setFlagsFromString } = process.getBuiltinModule('node:v8');
  setFlagsFromString('--regexp-interpret-all');
  startupSnapshot.addSerializeCallback(() => setFlagsFromString('--no-regexp-interpret-all --regexp-tier-up'));
  // Its own message and exit status, not Node's unhandled-rejection default: the build (scripts/build.mjs) fails here.
  import('./warm.js')
    .then((m) => m.warm())
    .catch((e: unknown) => {
      process.stderr.write(`ipam-shim build: the snapshot warm-up failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    });
  startupSnapshot.setDeserializeMainFunction(main);
  return true;
}

/**
 * True when the code-cache maker (scripts/code-cache.mjs, build time, IPAM_SHIM_BOOT=code-cache) runs this bundle:
 * then it warms the maker's calls instead of serving one, so that the cache it takes afterwards holds their
 * compiled code. Only the maker sets the hook; the executable's loader (scripts/sea-loader.cjs) never does.
 */
export function buildingCodeCache(): boolean {
  const hook = (globalThis as Record<symbol, unknown>)[Symbol.for('ipam-shim.code-cache-build')] as
    | { commands: string[]; done: (error?: unknown) => void }
    | undefined;
  if (!hook) return false;
  if (hook.commands.length === 0)
    hook.done(); // the top level only (VERSION, the CLI)
  else import('./warm.js').then((m) => m.warm(hook.commands)).then(() => hook.done(), hook.done);
  return true;
}
