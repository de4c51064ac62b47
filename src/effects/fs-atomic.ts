// Crash-safe files: write a temp file, fsync, rename over the target, fsync the directory. Never follow
// symlinks (a planted link must not redirect a root-owned write).
import { closeSync, constants, openSync, readFileSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readFile, rename, unlink, chmod } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';

const { O_CREAT, O_EXCL, O_WRONLY, O_NOFOLLOW, O_RDONLY, O_DIRECTORY } = constants;

/** Atomically replaces `path` with `data` (mode 0600 unless given). Idempotent; a crash leaves old or new. */
export async function writeFileAtomic(path: string, data: string, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, mode);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (e) {
    await fh.close();
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await fh.close();
  try {
    // rename replaces a symlink at `path` itself rather than writing through it.
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await syncDir(dir);
}

export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, O_RDONLY | O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Reads a file without following a symlink at its last component. ENOENT → undefined. */
export async function readFileNoFollow(path: string): Promise<string | undefined> {
  let fh;
  try {
    fh = await open(path, O_RDONLY | O_NOFOLLOW);
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return undefined;
    throw e;
  }
  try {
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/**
 * readFileNoFollow, synchronously: for reading thousands of small files in a row (GC listing the ledger), where
 * a round trip through the thread pool per open/stat/read/close costs more than the reads themselves.
 */
export function readFileNoFollowSync(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW);
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return undefined;
    throw e;
  }
  try {
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

export async function readJsonFile<T>(path: string): Promise<T | undefined> {
  const text = await readFile(path, 'utf8').catch((e) => (isErrno(e, 'ENOENT') ? undefined : Promise.reject(e)));
  return text === undefined ? undefined : (JSON.parse(text) as T);
}

/** Removes a file; missing is success. */
export async function removeFile(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (e) {
    if (!isErrno(e, 'ENOENT')) throw e;
  }
}

/**
 * Creates `dir` (0700) if missing and refuses one that is a symlink, not a directory, owned by another user
 * or writable by group/others: the ledger decides which IPs get released, so nobody else may write it.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await assertPrivateDir(dir);
  if (st.mode & 0o055) await chmod(dir, 0o700);
}

/**
 * The checks of ensurePrivateDir on an existing directory, creating and changing nothing (ENOENT propagates).
 * For directories the shim does not own the layout of (the configured stateDir itself) and for read-only paths.
 */
export async function assertPrivateDir(dir: string): Promise<Stats> {
  const st = await lstat(dir);
  const uid = process.getuid?.() ?? st.uid;
  if (st.isSymbolicLink() || !st.isDirectory()) throw new UnsafePathError(dir, 'is not a directory (symlink?)');
  if (st.uid !== uid) throw new UnsafePathError(dir, `is owned by uid ${st.uid}, not ${uid}`);
  if (st.mode & 0o022) throw new UnsafePathError(dir, `is writable by group or others (mode ${(st.mode & 0o777).toString(8)})`);
  return st;
}

export class UnsafePathError extends Error {
  constructor(readonly path: string, why: string) {
    super(`${path} ${why}`);
    this.name = 'UnsafePathError';
  }
}

export function isErrno(e: unknown, code: string): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}
