// One chained pod record on network `net`, for tests that write a ledger or judge records without a real ADD.
import type { LedgerRecord } from '../../../src/ledger/record.js';

/** A pod's attached chained record for `containerID`/eth0 holding `ip`, created and updated at `at`. */
export const podRecord = (containerID: string, ip: string, at = ''): LedgerRecord => ({
  v: 1,
  containerID,
  ifname: 'eth0',
  network: 'net',
  owner: 'pod',
  state: 'attached',
  placement: 'chained',
  ips: [ip],
  netns: '',
  createdAt: at,
  updatedAt: at,
  // What today's ADD records when the runtime names no pod (src/ledger/identity.ts); an older shim's record has none.
  cniArgs: '',
});
