import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        // Real namespaces, real tools, real plugins: forks, generous timeouts.
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts', 'test/cri/**/*.test.ts', 'test/image/**/*.test.ts', 'test/node/**/*.test.ts'],
          pool: 'forks',
          globalSetup: ['test/helpers/host-guard.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
