// One rule for an uplink name that goes into an nft script: the config check (every ADD, install) and the
// CLI's --uplink both use safeUplinkName.
import { describe, expect, it } from 'vitest';
import { CniError } from '../../src/cni/errors.js';
import { checkProbeSettings, safeUplinkName } from '../../src/probe-rewrite/ruleset.js';
import { probeRewriteCommand } from '../../src/probe-rewrite/cli.js';
import { UsageError } from '../../src/contract/command.js';

const good = ['eth0', 'enP1s1', 'br-0.100', 'a_b', 'x'.repeat(15)];
const bad = ['', '.', '..', 'x'.repeat(16), 'eth 0', 'eth0"', "eth0'", 'a/b', 'eth0;', 'é0'];

describe('uplink names', () => {
  it('accepts interface names and refuses what could break out of an nft string', () => {
    for (const n of good) expect(safeUplinkName(n), n).toBe(true);
    for (const n of bad) expect(safeUplinkName(n), n).toBe(false);
  });
  it('the config check refuses the same names with code 7', () => {
    for (const n of good) expect(() => checkProbeSettings({ uplink: n })).not.toThrow();
    for (const n of bad) {
      const e = (() => {
        try {
          checkProbeSettings({ uplink: n });
        } catch (err) {
          return err;
        }
      })();
      expect(e, n).toBeInstanceOf(CniError);
      expect((e as CniError).code, n).toBe(7);
    }
  });
  it('the CLI refuses the same names as a usage error, before touching anything', async () => {
    for (const n of bad) {
      await expect(
        probeRewriteCommand.run(['status', '--uplink', n], {
          run: async () => {
            throw new Error('must not run');
          },
          env: {},
        } as never),
        n,
      ).rejects.toBeInstanceOf(UsageError);
    }
  });
});
