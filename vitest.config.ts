import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The suites run the single executable, as a node does (test/support/shim/cni.ts); these also run the bundle for `node`.
const BUNDLE_SUITES = ['test/e2e/protocol.test.ts', 'test/e2e/ipam-slot.test.ts'];
const integration = { pool: 'forks' as const, globalSetup: ['test/support/net/host-guard.ts'], testTimeout: 120_000, hookTimeout: 120_000 };

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        // Real namespaces, real tools, real plugins: forks, generous timeouts.
        test: {
          name: 'integration',
          include: [
            'test/integration/**/*.test.ts',
            'test/e2e/**/*.test.ts',
            'test/cri/**/*.test.ts',
            'test/image/**/*.test.ts',
            'test/node/**/*.test.ts',
          ],
          ...integration,
        },
      },
      {
        test: {
          name: 'bundle',
          include: BUNDLE_SUITES,
          env: { IPAM_SHIM_BIN: fileURLToPath(new URL('./dist/ipam-shim.js', import.meta.url)) },
          ...integration,
        },
      },
    ],
  },
});
