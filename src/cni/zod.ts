// The one zod the shim uses: zod/mini, configured once. Every schema module imports it from here
// (`import * as z`), so the settings are in place before any schema is built (imports evaluate first).
//
// zod/mini, not the classic API: a classic schema carries dozens of per-instance methods and lazy getters, and
// every schema object is in the single executable's startup snapshot, deserialized by every call (VERSION
// included). Same core, same checks and English messages; methods live on the prototype (docs/performance.md).
// jitless: zod would compile a parser per object schema on first use (new Function), a loss in a process that
// parses each schema once or twice.
import { config, locales } from 'zod/mini';

config({ ...locales.en(), jitless: true });

// Re-exported by name (not as one namespace object), so the bundler keeps only the schema kinds we use.
export * from 'zod/mini';
