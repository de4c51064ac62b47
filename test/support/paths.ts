// Where the tests find the repository, the fixtures and the reference plugins. Importing it needs no build (shim/cni.ts,
// which names the built executable, refuses to load without one).
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
/** Reference plugins (Debian's containernetworking-plugins); override to test newer upstream builds. */
export const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
export const FIXTURE_BIN = join(ROOT, 'test/fixtures/bin');
