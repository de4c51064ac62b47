// A delegate whose file is still open for writing (an installer copying it in place) cannot be executed for that
// moment: execve fails with ETXTBSY. The delegate runner retries it briefly, recognising it by the errno the exec
// wrapper reports (RunResult.spawnError), not by text. Real files, real execve.
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/cni/errors.js';
import { Delegate } from '../../src/effects/delegate.js';
import { run } from '../../src/effects/exec.js';
import { silentLogger } from '../../src/log.js';

const SCRIPT = '#!/bin/sh\necho \'{"cniVersion":"1.0.0","supportedVersions":["0.3.1","1.0.0"]}\'\n';

let dir: string;
let fd: number | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'busy-ipam-'));
  writeFileSync(join(dir, 'busy-ipam'), SCRIPT, { mode: 0o755 });
  // Held open for writing, as a copy in progress holds it.
  fd = openSync(join(dir, 'busy-ipam'), 'r+');
});
afterEach(() => {
  if (fd !== undefined) closeSync(fd);
  fd = undefined;
  rmSync(dir, { recursive: true, force: true });
});
const release = () => {
  if (fd !== undefined) closeSync(fd);
  fd = undefined;
};

const delegate = () => new Delegate({ type: 'busy-ipam', cniPath: [dir], env: {}, timeoutMs: 10_000, log: silentLogger });

describe('a delegate file still open for writing (ETXTBSY)', () => {
  it('the exec wrapper reports the errno, not only "could not run"', async () => {
    const r = await run(join(dir, 'busy-ipam'), [], { check: false });
    expect(r).toMatchObject({ spawnError: 'ETXTBSY', notFound: false, exitCode: undefined });
  });

  it('is retried: the call succeeds once the writer closes the file', async () => {
    // Closed after the first attempt failed and before the retries (50 ms apart, five of them) are used up: the
    // timer is due before the second retry's, on the same event loop.
    setTimeout(release, 60);
    await expect(delegate().call('VERSION', { cniVersion: '1.0.0' })).resolves.toMatchObject({ supportedVersions: ['0.3.1', '1.0.0'] });
  });

  it('a file that stays busy still fails as a delegate that gave no answer (101), after the bounded retries', async () => {
    await expect(delegate().call('VERSION', { cniVersion: '1.0.0' })).rejects.toMatchObject({ code: ErrorCode.DelegateFailed });
  });
});
