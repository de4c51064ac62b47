// cilium-agent's API as the cilium-cni stand-in (test/fixtures/cilium-cni/standin.js) calls it, on a unix socket:
// GET /v1/config (what cilium-cni reads: ipam-mode, addressing = the router addresses the agent was started with
// as --local-router-ipv4/6, datapathMode, MTUs), GET /v1/healthz, PUT /v1/endpoint/{id}, DELETE /v1/endpoint
// (batch delete by container-id), GET /v1/endpoint/{id}/healthz. No policy, no identities: endpoints are kept as
// they were sent. It can be down (nothing listens: connect fails) or slow (every answer delayed).
// docs/testing.md, "The cilium-cni stand-in", names what is copied from Cilium's source.
import { mkdtemp, rm } from 'node:fs/promises';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// vitest's hooks only inside vitest: scripts (the demo, the CRI bench) reach this module through the CRI bed, and
// importing 'vitest' outside a vitest run throws.
const hooks = process.env.VITEST ? await import('vitest') : undefined;

export interface CiliumAgentOptions {
  /** Socket path (default: cilium.sock in a fresh temp dir, removed on stop). */
  socketPath?: string;
  /** --local-router-ipv4: the pods' gateway (default 169.254.23.1: outside every test range). */
  routerIPv4?: string;
  /** --local-router-ipv6; absent = IPv6 disabled in the agent (cilium-cni then ignores v6 addresses). */
  routerIPv6?: string;
  /** ipam-mode (default delegated-plugin, the only mode the stand-in models). */
  ipamMode?: string;
  deviceMTU?: number;
  routeMTU?: number;
}

export interface AgentRequest {
  method: string;
  url: string;
  body: unknown;
}

/** How long the cilium-cni stand-in waits for this agent, in seconds (tests keep them short; real: 30 and ~20). */
export interface StandInWaits {
  connect?: number;
  del?: number;
}

export class CiliumAgentStandIn {
  readonly requests: AgentRequest[] = [];
  /** Endpoints the agent holds, by the id cilium-cni PUT them under. */
  readonly endpoints = new Map<string, any>();
  /** PUT /v1/endpoint answers 500 (a failure after the IPAM delegate's ADD). */
  refuseEndpoints = false;
  private server: Server | undefined;
  private delayMs = 0;

  private constructor(
    readonly socketPath: string,
    private readonly opts: CiliumAgentOptions,
    private readonly ownDir: string | undefined,
  ) {}

  static async start(opts: CiliumAgentOptions = {}): Promise<CiliumAgentStandIn> {
    const ownDir = opts.socketPath ? undefined : await mkdtemp(join(tmpdir(), 'cilium-agent-'));
    const agent = new CiliumAgentStandIn(opts.socketPath ?? join(ownDir!, 'cilium.sock'), opts, ownDir);
    await agent.up();
    return agent;
  }

  /** The router address pods get as their gateway. */
  get routerIPv4(): string {
    return this.opts.routerIPv4 ?? '169.254.23.1';
  }

  /** The environment a runtime passes on to the stand-in: this socket and the waits. */
  env(waits: StandInWaits = {}): Record<string, string> {
    return {
      CILIUM_SOCK: this.socketPath,
      // Generous by default (a loaded machine must not turn a slow answer into a 999); a test that takes the
      // agent down passes short ones.
      CILIUM_CNI_STANDIN_CONNECT_TIMEOUT: String(waits.connect ?? 10),
      CILIUM_CNI_STANDIN_DEL_TIMEOUT: String(waits.del ?? 10),
    };
  }

  /** GET /v1/config's body. */
  config(): Record<string, unknown> {
    const o = this.opts;
    const addressing: Record<string, unknown> = { ipv4: { enabled: true, ip: this.routerIPv4 } };
    if (o.routerIPv6) addressing.ipv6 = { enabled: true, ip: o.routerIPv6 };
    return {
      spec: {},
      status: {
        'ipam-mode': o.ipamMode ?? 'delegated-plugin',
        addressing,
        datapathMode: 'veth',
        ...(o.deviceMTU ? { deviceMTU: o.deviceMTU } : {}),
        ...(o.routeMTU ? { routeMTU: o.routeMTU } : {}),
      },
    };
  }

  /** Every answer waits `ms` first (0: none). */
  slow(ms: number): void {
    this.delayMs = ms;
  }

  get isUp(): boolean {
    return this.server !== undefined;
  }

  /** Stops listening and removes the socket: cilium-cni's connect fails as with a stopped agent. */
  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s) await new Promise<void>((r) => s.close(() => r()));
    await rm(this.socketPath, { force: true });
  }

  async up(): Promise<void> {
    if (this.server) return;
    await rm(this.socketPath, { force: true });
    // No request or header deadline and a deep backlog: 64 plugins at once on a loaded machine must not be cut off
    // by the stand-in (the real agent does not drop them either).
    const server = createServer({ requestTimeout: 0, headersTimeout: 0 }, (req, res) => void this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path: this.socketPath, backlog: 1024 }, () => resolve());
    });
    this.server = server;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await this.down();
    if (this.ownDir) await rm(this.ownDir, { recursive: true, force: true });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += chunk;
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    const url = req.url ?? '';
    this.requests.push({ method: req.method ?? '', url, body });
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    const send = (status: number, obj?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(obj === undefined ? '' : JSON.stringify(obj));
    };
    const ep = /^\/v1\/endpoint\/([^/]+)(\/healthz)?$/.exec(url);
    if (req.method === 'GET' && url === '/v1/config') return send(200, this.config());
    if (req.method === 'GET' && url === '/v1/healthz') return send(200, { cilium: { state: 'Ok' } });
    if (req.method === 'PUT' && ep && !ep[2]) {
      if (this.refuseEndpoints) return send(500, { message: 'endpoint refused by the test' });
      const id = decodeURIComponent(ep[1]!);
      this.endpoints.set(id, body);
      return send(201, { id: this.endpoints.size, status: { state: 'waiting-for-identity' } });
    }
    if (req.method === 'GET' && ep?.[2]) {
      const id = decodeURIComponent(ep[1]!);
      return this.endpoints.has(id) ? send(200, { overallHealth: 'OK' }) : send(404);
    }
    if (req.method === 'DELETE' && url === '/v1/endpoint') {
      const cid = (body as any)?.['container-id'];
      let n = 0;
      for (const [id, e] of this.endpoints)
        if (e?.['container-id'] === cid) {
          this.endpoints.delete(id);
          n++;
        }
      return send(n ? 200 : 404);
    }
    send(404, `no route ${req.method} ${url} in the agent stand-in`);
  }
}

/**
 * One agent per test, started before and stopped after each (also when the test failed). The returned holder's
 * `agent` is the current test's.
 */
export function useCiliumAgent(opts: CiliumAgentOptions = {}): { agent: CiliumAgentStandIn } {
  const holder = {} as { agent: CiliumAgentStandIn };
  if (!hooks) throw new Error('useCiliumAgent registers vitest hooks: call it from a test file');
  hooks.beforeEach(async () => {
    holder.agent = await CiliumAgentStandIn.start(opts);
  });
  hooks.afterEach(async () => {
    await holder.agent?.stop();
  });
  return holder;
}
