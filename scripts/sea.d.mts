// Types of scripts/sea.mjs (the build runs it with plain node; the bench imports it from TypeScript).
export declare const SEA_EXEC_ARGV: readonly string[];
export declare const SEA_FUSE: string;
export declare function writeBlob(node: string, config: string): void;
export declare function withoutNoteNoise(text: string): string;
export declare function injectBlob(node: string, executable: string, blob: string, postject: string): void;
