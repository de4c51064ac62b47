// How this process started, for `ipam-shim --version` (src/cli/version.ts): from the single executable's V8
// startup snapshot (src/main.ts sets it in the snapshot's main function) or by evaluating the bundle.
export const startup = { fromSnapshot: false };
