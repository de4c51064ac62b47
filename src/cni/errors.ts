// The one place that decides what a CNI error looks like. Everything that fails throws (or is turned into)
// a CniError; only main prints it.

/** Spec codes (CNI SPEC "Error" section) and the shim's own 100+ catalogue (README "Error codes"). */
export const ErrorCode = {
  IncompatibleVersion: 1,
  UnsupportedField: 2,
  UnknownContainer: 3,
  InvalidEnvironment: 4,
  IoFailure: 5,
  DecodingFailure: 6,
  InvalidNetworkConfig: 7,
  TryAgainLater: 11,
  PluginNotAvailable: 50,
  LimitedConnectivity: 51,
  ReservedAddress: 100,
  DelegateFailed: 101,
  ResidueCleanupFailed: 102,
  LedgerCorrupt: 103,
  Internal: 999,
} as const;

export interface CniErrorJson {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  readonly code: number;
  readonly msg: string;
  readonly details: string | undefined;
  /** Extra fields for the call's error log line (an address, a CIDR): logged, never printed on stdout. */
  readonly logFields: Record<string, unknown> | undefined;

  constructor(code: number, msg: string, opts: { details?: string; cause?: unknown; logFields?: Record<string, unknown> } = {}) {
    super(opts.details ? `${msg}; ${opts.details}` : msg, { cause: opts.cause });
    this.name = 'CniError';
    this.code = code;
    this.msg = msg;
    this.details = opts.details;
    this.logFields = opts.logFields;
  }

  toJSON(cniVersion: string): CniErrorJson {
    const out: CniErrorJson = { cniVersion, code: this.code, msg: this.msg };
    if (this.details) out.details = this.details;
    return out;
  }
}

/** A failed external program (see effects/exec.ts). Carries enough to explain itself in `details`. */
export class ToolError extends Error {
  constructor(
    readonly file: string,
    readonly args: readonly string[],
    readonly exitCode: number | undefined,
    readonly stderr: string,
    opts: { cause?: unknown; timedOut?: boolean } = {},
  ) {
    super(`${file} ${args.join(' ')}: ${opts.timedOut ? 'timed out' : `exit ${exitCode ?? 'signal'}`}: ${firstLines(stderr)}`, {
      cause: opts.cause,
    });
    this.name = 'ToolError';
    this.timedOut = opts.timedOut ?? false;
  }
  readonly timedOut: boolean;
}

function firstLines(text: string, max = 3): string {
  return text.trim().split('\n').slice(0, max).join(' | ');
}

interface ZodLikeIssue {
  path: PropertyKey[];
  message: string;
}
function isZodError(e: unknown): e is { issues: ZodLikeIssue[] } {
  return (
    typeof e === 'object' &&
    e !== null &&
    /^\$?ZodError$/.test(String((e as { name?: unknown }).name)) &&
    Array.isArray((e as { issues?: unknown }).issues)
  );
}

/** Formats zod issues as "path: message" lines, the way operators read them. */
export function formatIssues(issues: ZodLikeIssue[]): string {
  return issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`).join('; ');
}

/** Anything thrown → CniError. A CniError (including a delegate's own error object) passes unchanged. */
export function toCniError(e: unknown, fallbackCode: number = ErrorCode.Internal): CniError {
  if (e instanceof CniError) return e;
  if (isZodError(e)) return new CniError(ErrorCode.InvalidNetworkConfig, 'invalid network config', { details: formatIssues(e.issues), cause: e });
  if (e instanceof ToolError) return new CniError(fallbackCode, e.message, { cause: e });
  if (e instanceof Error) return new CniError(fallbackCode, e.message, { cause: e });
  return new CniError(fallbackCode, String(e));
}
