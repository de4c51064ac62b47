// The per-test fixture most e2e files share: a fresh scratch directory and a TestNet, removed after each test
// (namespaces first, then the directory), also when the test failed.
import { afterEach, beforeEach } from 'vitest';
import { scratch } from '../shim/cni.js';
import { TestNet } from './netns.js';

export type Scratch = Awaited<ReturnType<typeof scratch>>;

/**
 * Registers the hooks and returns the two objects the tests use. They stay the same objects for the whole file:
 * `s` gets a new directory's paths before every test, `net` is emptied after every test.
 */
export function useScratchNet(): { s: Scratch; net: TestNet } {
  const s = {} as Scratch;
  const net = new TestNet();
  beforeEach(async () => {
    Object.assign(s, await scratch());
  });
  afterEach(async () => {
    await net.cleanup();
    await s.cleanup();
  });
  return { s, net };
}
