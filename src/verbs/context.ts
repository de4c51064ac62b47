// What every verb works with, built once per invocation from the request.
import { join } from 'node:path';
import type { Request } from '../cni/skel.js';
import type { Attachment } from '../cni/config.js';
import { Delegate } from '../effects/delegate.js';
import { Ledger, matchesAny } from '../effects/ledger.js';
import { run as defaultRun, KILL_GRACE_MS, type Run } from '../effects/exec.js';
import type { Logger } from '../log.js';

export interface VerbContext extends Request {
  log: Logger;
  run: Run;
  ledger: Ledger;
  /** The wrapped IPAM plugin; required in the IPAM slot, optional when chained (GC/STATUS/agent IPs use it). */
  delegate: Delegate | undefined;
  procEnv: NodeJS.ProcessEnv;
}

export function createContext(req: Request, log: Logger, procEnv: NodeJS.ProcessEnv, run: Run = defaultRun): VerbContext {
  const { settings } = req.conf;
  const delegate = settings.delegate
    ? new Delegate({
        type: settings.delegate.type,
        cniPath: req.env.path,
        env: procEnv,
        timeoutMs: settings.delegateTimeoutMs,
        log,
        cacheDir: join(settings.stateDir, '.delegate-versions'),
        run,
      })
    : undefined;
  return { ...req, log, run, ledger: new Ledger(settings.stateDir, req.conf.name), delegate, procEnv };
}

export const attachmentOf = (ctx: VerbContext): Attachment => ({ containerID: ctx.env.containerID, ifname: ctx.env.ifname });

/** The ledger lock's own wait: ADDs of other attachments hold the attachment lock only for file writes. */
const MIN_ATTACHMENT_WAIT_MS = 30_000;

/**
 * Runs fn as the only ADD, DEL or CHECK of this attachment (Ledger.lockedAttachment). A waiter waits as long as
 * one such call can last: three delegate calls (VERSION, ADD, the undo DEL), each bounded by delegateTimeoutMs.
 */
export function exclusively<T>(ctx: VerbContext, fn: () => Promise<T>): Promise<T> {
  const waitMs = Math.max(MIN_ATTACHMENT_WAIT_MS, 3 * (ctx.conf.settings.delegateTimeoutMs + KILL_GRACE_MS) + 5_000);
  return ctx.ledger.lockedAttachment(attachmentOf(ctx), waitMs, fn);
}

export const ownerOf = (ctx: VerbContext, containerID: string): 'agent' | 'pod' =>
  matchesAny(containerID, ctx.conf.settings.agentContainerIDs) ? 'agent' : 'pod';
