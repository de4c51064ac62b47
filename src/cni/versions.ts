// Spec versions the shim speaks, and the gates the spec puts on verbs.
import { CniError, ErrorCode } from './errors.js';

export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export const LATEST_VERSION = '1.1.0';

export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

export const atLeast = (v: string, min: string): boolean => compareVersions(v, min) >= 0;

export function isSupported(v: string): boolean {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** Verb gates: CHECK needs 0.4.0, GC and STATUS 1.1.0 (else code 1, as skel does). */
const MIN_VERSION: Record<string, string> = { CHECK: '0.4.0', GC: '1.1.0', STATUS: '1.1.0' };

export function assertVersionAllows(command: string, version: string): void {
  const min = MIN_VERSION[command];
  if (min && !atLeast(version, min)) {
    throw new CniError(ErrorCode.IncompatibleVersion, `config version does not allow ${command}`, {
      details: `${command} needs cniVersion ${min} or later; config has ${version}`,
    });
  }
}

/** The highest version both sides speak that is not newer than `wanted`; undefined when none. */
export function bridgeVersion(wanted: string, theirs: readonly string[]): string | undefined {
  return theirs
    .filter((v) => isSupported(v) && compareVersions(v, wanted) <= 0)
    .sort(compareVersions)
    .at(-1);
}

/** The version to answer in: the requested one when we speak it, else the latest. */
export function answerVersion(requested: unknown): string {
  return typeof requested === 'string' && isSupported(requested) ? requested : LATEST_VERSION;
}

/** The VERSION reply (shared by the dispatcher and main's fast path, which must not load the dispatcher). */
export function versionReply(requested: unknown): string {
  return JSON.stringify({ cniVersion: answerVersion(requested), supportedVersions: SUPPORTED_VERSIONS });
}
