// A network's ledger directory, kept safe: it holds only what a ledger writes (anything else is refused,
// untouched), and every path built from a name stays one file inside it.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CniError, ErrorCode } from '../cni/errors.js';
import { isErrno, UnsafePathError } from './fs-atomic.js';

export function unsafe(e: UnsafePathError): CniError {
  return new CniError(ErrorCode.LedgerCorrupt, `unsafe ledger directory: ${e.message}`, { details: e.path, cause: e });
}

/** What a network's ledger directory holds: the two subdirectories, the locks, and dot-named temp/probe/attachment-lock files. */
const OWN_ENTRY = /^(records|ips|lock(\.break)?|agent-.+\.lock(\.break)?|\..+)$/;

/**
 * `<stateDir>/<network>` may exist already, and open() tightens it to 0700. One that holds anything else is not
 * ours to chmod or write into (stateDir "/" with a network named "etc" would otherwise lock the node out of
 * /etc): refused, untouched. Missing is fine.
 */
export function assertLedgerLayout(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return;
    throw e;
  }
  const foreign = names.filter((n) => !OWN_ENTRY.test(n));
  if (foreign.length) {
    const shown = foreign.slice(0, 3).join(', ') + (foreign.length > 3 ? ', …' : '');
    throw new UnsafePathError(dir, `holds files that are not an ipam-shim ledger's (${shown}): check stateDir and the network name`);
  }
}

/**
 * A ledger path would leave its directory: the name it is built from (an attachment's container ID and interface
 * name, an owner) is not one file name. Every CNI call's names are validated first (src/cni/env.ts), so only a name
 * from elsewhere (the runtime's result cache, read by the agent) can get here: nothing is created, read or removed.
 */
export class PathEscapeError extends CniError {
  constructor(
    readonly dir: string,
    readonly name: string,
  ) {
    super(ErrorCode.InvalidEnvironment, 'a ledger path would leave its directory', {
      details: `${JSON.stringify(name)} is not one file name in ${dir}`,
    });
  }
}

/** `dir`/`name`, for a name that is one file name; anything that could resolve elsewhere throws PathEscapeError. */
export function fileIn(dir: string, name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) throw new PathEscapeError(dir, name);
  return join(dir, name);
}
