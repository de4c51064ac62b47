// Types of scripts/sea.mjs (the build runs it with plain node; the bench imports it from TypeScript).
export declare const SEA_EXEC_ARGV: readonly string[];
export declare const SEA_FUSE: string;
export interface SeaTarget {
  arch: 'x64' | 'arm64';
  /** Where the build writes it, under dist/. */
  out: string;
  /** The official Node.js binary it embeds. */
  node: string;
  /** What starts `node` on the build machine (an emulator for another architecture). */
  run: readonly string[];
}
export declare const SEA_TARGETS: readonly SeaTarget[];
export declare function writeBlob(node: string, config: string, run?: readonly string[]): void;
export declare function withoutNoteNoise(text: string): string;
export declare function injectBlob(node: string, executable: string, blob: string, postject: string): void;
