// STATUS's verdict over time (pure). A runtime that sends STATUS (containerd ≥ 2.0.1 with a 1.1.0 list, on every
// CRI Status call = kubelet's 5 s poll) turns a failure into NetworkReady=false, i.e. a NotReady node. A failure
// that says something definite (state dir not writable, delegate missing, the delegate's own error, every range
// reserved) is reported at once: it will not clear by itself. A delegate that merely did not answer (timed out,
// died without a CNI error, or said 11 "try again later") is tolerated for `graceMs` from the first such failure
// of a streak, if the network was seen healthy before: one slow call must not take a node out of scheduling.
// docs/configuration.md "STATUS and node readiness" states the decision with the spec's words on 50/51.

/** What this call found. */
export type StatusCheck = { kind: 'ok' } | { kind: 'persistent' } | { kind: 'unanswered' };

/** What the state dir remembers between calls (each call is a fresh process). Times: ms since the epoch. */
export interface StatusMemo {
  /** The last success that followed a failure, or the first success: set means "was seen healthy". */
  healthySince?: number;
  /** The first unanswered call of the current streak. */
  failingSince?: number;
  /** Unanswered calls in the streak so far. */
  failures?: number;
  /** The first failure this network answered (not tolerated) since it was last healthy. */
  failedAt?: number;
}

type StatusVerdict =
  /** Answer success. */
  | { answer: 'ok'; recovered: boolean }
  /** Answer success, log the tolerated failure: `leftMs` of the grace remain. */
  | { answer: 'tolerated'; failingForMs: number; leftMs: number }
  /** Answer the error. `failingForMs` is set when a grace ran out (the message says so). */
  | { answer: 'fail'; failingForMs?: number };

export interface StatusDecision {
  verdict: StatusVerdict;
  /** The memo to write, or undefined when the stored one stays right (a healthy node writes nothing). */
  memo: StatusMemo | undefined;
}

export function decideStatus(check: StatusCheck, memo: StatusMemo, now: number, graceMs: number): StatusDecision {
  const wasHealthy = memo.healthySince !== undefined;
  /** A reported failure: remembered once (the first), so the success after it is logged as a recovery. */
  const failed = (verdict: StatusVerdict & { answer: 'fail' }, next: StatusMemo): StatusDecision => ({
    verdict,
    memo: memo.failedAt === undefined || next !== memo ? { ...next, failedAt: memo.failedAt ?? now } : undefined,
  });
  switch (check.kind) {
    case 'ok': {
      const steady = wasHealthy && memo.failingSince === undefined && memo.failedAt === undefined;
      const recovered = memo.failingSince !== undefined || memo.failedAt !== undefined;
      return { verdict: { answer: 'ok', recovered }, memo: steady ? undefined : { healthySince: now } };
    }
    case 'persistent':
      // Not "healthy" any more: a later unanswered call is not a blip of a healthy network.
      return failed({ answer: 'fail' }, wasHealthy || memo.failingSince !== undefined ? {} : memo);
    case 'unanswered': {
      if (!wasHealthy || graceMs === 0) return failed({ answer: 'fail' }, memo);
      // A streak that "began" in the future means the clock went back: start it again now.
      const since = memo.failingSince !== undefined && memo.failingSince <= now ? memo.failingSince : now;
      const failingForMs = now - since;
      if (failingForMs >= graceMs) return failed({ answer: 'fail', failingForMs }, memo);
      return {
        verdict: { answer: 'tolerated', failingForMs, leftMs: graceMs - failingForMs },
        memo: { healthySince: memo.healthySince, failingSince: since, failures: (since === memo.failingSince ? (memo.failures ?? 0) : 0) + 1 },
      };
    }
  }
}
