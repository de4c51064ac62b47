// The shim's executable into the CNI bin dir: temp file in the same directory, fsync, rename (a runtime never
// finds a half-written binary, and a running copy keeps its old inode).
import { constants, createReadStream } from 'node:fs';
import { chmod, copyFile, lstat, mkdir, open, readdir, realpath, rename, stat, unlink } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { isSea } from 'node:sea';
import { PLUGIN_TYPE } from '../cni/config.js';
import { ABOUT } from '../cni/skel.js';
import { runBare } from '../effects/shim-binary.js';
import { isErrno, syncDir } from '../effects/fs-atomic.js';

export const BINARY_NAME = PLUGIN_TYPE;
const STALE_TEMP_MS = 10 * 60_000;

/** The executable to install by default: the single executable itself, or the bundled script under node. */
export function defaultSource(): string {
  if (isSea()) return process.execPath;
  const script = process.argv[1];
  if (!script || /\.[cm]?ts$/.test(script)) throw new Error('running from sources: pass --source (e.g. dist/ipam-shim)');
  return script;
}

async function sha256(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** What an ipam-shim executable prints when run with neither CNI_COMMAND nor arguments (its about line). */
const ABOUT_PREFIX = ABOUT.slice(0, ABOUT.indexOf(':'));

/**
 * Refuses a source that is not an ipam-shim executable (`/bin/true`, a truncated download): it must answer
 * with the about line, as the installed copy will when a runtime or an operator runs it.
 */
export async function checkSource(source: string): Promise<void> {
  const r = await runBare(source);
  if (r.notFound) throw new Error(`source ${source} cannot be executed`);
  if (r.exitCode !== 0 || !r.stderr.startsWith(ABOUT_PREFIX)) {
    const said = (r.stderr || r.stdout).trim().split('\n')[0]?.slice(0, 120);
    throw new Error(
      `source ${source} is not an ipam-shim executable (run without arguments it ${said ? `says ${JSON.stringify(said)}` : 'says nothing'}, exit ${r.exitCode ?? (r.timedOut ? 'timeout' : '?')}; expected "${ABOUT_PREFIX} …")`,
    );
  }
}

export interface BinaryOutcome {
  path: string;
  action: 'installed' | 'updated' | 'unchanged';
  bytes: number;
  sha256: string;
}

/** Temp files of an installer that died mid-copy (older than 10 minutes: a concurrent installer's are younger). */
async function removeStaleTemps(binDir: string): Promise<void> {
  const names = await readdir(binDir).catch(() => [] as string[]);
  for (const n of names.filter((n) => n.startsWith(`.${BINARY_NAME}.`) && n.endsWith('.tmp'))) {
    const st = await lstat(join(binDir, n)).catch(() => undefined);
    if (st?.isFile() && Date.now() - st.mtimeMs > STALE_TEMP_MS) await unlink(join(binDir, n)).catch(() => undefined);
  }
}

/** Copies `source` to `<binDir>/ipam-shim` (0755) atomically; nothing is written when the bytes already match. */
export async function installBinary(source: string, binDir: string): Promise<BinaryOutcome> {
  const dest = join(binDir, BINARY_NAME);
  const src = await realpath(source);
  const st = await stat(src);
  if (!st.isFile()) throw new Error(`source ${source} is not a file`);
  await mkdir(binDir, { recursive: true, mode: 0o755 });
  await removeStaleTemps(binDir);
  const hash = await sha256(src);
  const existing = await lstat(dest).catch((e) => (isErrno(e, 'ENOENT') ? undefined : Promise.reject(e)));
  if (existing?.isFile() && existing.size === st.size && (existing.mode & 0o777) === 0o755 && (await sha256(dest)) === hash) {
    return { path: dest, action: 'unchanged', bytes: st.size, sha256: hash };
  }
  const tmp = join(binDir, `.${BINARY_NAME}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await copyFile(src, tmp, constants.COPYFILE_EXCL);
    await chmod(tmp, 0o755);
    const fh = await open(tmp, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    // The source may have been replaced while we copied (a rebuild): never publish a mixture.
    if ((await sha256(tmp)) !== hash) throw new Error(`source ${source} changed while it was copied; run install again`);
    await rename(tmp, dest);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await syncDir(binDir);
  return { path: dest, action: existing ? 'updated' : 'installed', bytes: st.size, sha256: hash };
}
