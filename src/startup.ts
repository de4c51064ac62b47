// How this process started, for `ipam-shim --version` (src/cli/version.ts): from the single executable's V8
// startup snapshot (src/main.ts sets it in the snapshot's main function), from its code cache (the executable's
// loader, scripts/sea-loader.cjs, says whether V8 accepted it), or by evaluating the bundle.
const boot = (globalThis as Record<symbol, unknown>)[Symbol.for('ipam-shim.boot')] as
  | { codeCache: 'accepted' | 'rejected' | 'none'; caches: () => Record<string, string> }
  | undefined;

export const startup: { fromSnapshot: boolean; codeCache?: string; caches?: () => Record<string, string> } = {
  fromSnapshot: false,
  codeCache: boot?.codeCache,
  caches: boot?.caches,
};
