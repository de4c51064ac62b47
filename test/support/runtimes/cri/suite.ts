// The per-file fixture of the CRI suites: one node netns and one private containerd shared by the file's tests
// (starting containerd and importing the image costs ~2 s), torn down after the last test even when tests failed.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { rootOrSkip, TestNet } from '../../net/netns.js';
import { CriBed, hasContainerd, type CriBedOptions } from './bed.js';
import { containerdBinDir } from './containerd.js';

/**
 * Root and containerd (CONTAINERD_BIN_DIR's or the system's), runc, busybox-static; with CI=true a missing
 * prerequisite fails instead of skipping.
 */
export function criOrSkip(): boolean {
  if (!rootOrSkip()) return false;
  if (hasContainerd()) return true;
  const what = `containerd, containerd-shim-runc-v2 and ctr in ${containerdBinDir()}, runc or busybox-static`;
  if (process.env.CI === 'true') throw new Error(`CI must have ${what} (scripts/install-deps.sh)`);
  console.warn(`skipping: missing ${what} (scripts/install-deps.sh)`);
  return false;
}

export interface CriSuite {
  bed: CriBed;
  /** The node netns name (containerd and every plugin run there). */
  node: string;
  /** For namespaces and undo steps of the file (cleaned after the bed). */
  net: TestNet;
}

/**
 * Registers beforeAll/afterAll: a node netns (lo up, ip_forward on), `prepare` for anything the node needs before
 * containerd starts, then the bed. The returned object is filled in beforeAll.
 */
export function useCriBed(opts: Omit<CriBedOptions, 'node'> & { prepare?: (node: string, net: TestNet) => Promise<void> }): CriSuite {
  const suite = { net: new TestNet() } as CriSuite;
  beforeAll(async () => {
    suite.node = await suite.net.netns('crinode');
    await opts.prepare?.(suite.node, suite.net);
    suite.bed = await CriBed.create({ ...opts, node: suite.node });
  });
  // A failed test's pods, ledger records and host-local reservations must not spill into the next test.
  afterEach(async (ctx) => {
    await suite.bed?.reset({ stores: ctx.task.result?.state === 'fail' });
  });
  afterAll(async () => {
    await suite.bed?.cleanup();
    await suite.net.cleanup();
  });
  return suite;
}
