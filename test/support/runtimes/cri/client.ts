// A typed CRI v1 client for the calls kubelet makes to run pod sandboxes (RunPodSandbox, StopPodSandbox,
// RemovePodSandbox, PodSandboxStatus, ListPodSandbox, Status, Version, ImageStatus), over containerd's unix socket.
// The service definitions come from test/fixtures/cri/runtime-v1.proto (a subset of k8s.io/cri-api).
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';

const PROTO = join(import.meta.dirname, '../../../fixtures/cri/runtime-v1.proto');

export interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}

export interface PortMapping {
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  container_port: number;
  host_port: number;
  host_ip?: string;
}

export interface PodSandboxConfig {
  metadata: PodSandboxMetadata;
  hostname: string;
  log_directory: string;
  dns_config?: { servers: string[]; searches: string[]; options: string[] };
  port_mappings?: PortMapping[];
  labels: Record<string, string>;
  annotations: Record<string, string>;
  linux: { cgroup_parent?: string; sysctls?: Record<string, string> };
}

export type SandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';

export interface PodSandboxStatus {
  id: string;
  metadata: PodSandboxMetadata;
  state: SandboxState;
  created_at: string;
  network: { ip: string; additional_ips: Array<{ ip: string }> } | null;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata;
  state: SandboxState;
  labels: Record<string, string>;
}

export interface VersionResponse {
  version: string;
  runtime_name: string;
  runtime_version: string;
  runtime_api_version: string;
}

export interface RuntimeCondition {
  type: string;
  status: boolean;
  reason: string;
  message: string;
}

/** A failed CRI call: the gRPC status code and containerd's message (which carries the CNI plugin's error). */
export class CriError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    readonly details: string,
  ) {
    super(`${method}: ${grpc.status[code] ?? code}: ${details}`);
  }
}

type Callback = (err: grpc.ServiceError | null, res: unknown) => void;
type Stub = grpc.Client & Record<string, (req: unknown, meta: grpc.Metadata, opts: grpc.CallOptions, cb: Callback) => void>;
type StubCtor = new (address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => Stub;

let services: { runtime: StubCtor; image: StubCtor } | undefined;
function loadServices(): { runtime: StubCtor; image: StubCtor } {
  if (!services) {
    const def = protoLoader.loadSync(PROTO, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    const v1 = (grpc.loadPackageDefinition(def) as any).runtime.v1;
    services = { runtime: v1.RuntimeService as StubCtor, image: v1.ImageService as StubCtor };
  }
  return services;
}

export class CriClient {
  private readonly runtime: Stub;
  private readonly image: Stub;

  /** `socket` is the path of containerd's gRPC socket. */
  constructor(
    readonly socket: string,
    private readonly timeoutMs = 120_000,
  ) {
    const { runtime, image } = loadServices();
    const address = `unix://${socket}`;
    const options = { 'grpc.default_authority': 'localhost' };
    this.runtime = new runtime(address, grpc.credentials.createInsecure(), options);
    this.image = new image(address, grpc.credentials.createInsecure(), options);
  }

  private call<T>(stub: Stub, method: string, req: unknown, timeoutMs = this.timeoutMs): Promise<T> {
    return new Promise((resolve, reject) => {
      stub[method]!(req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
        if (err) reject(new CriError(method, err.code, err.details));
        else resolve(res as T);
      });
    });
  }

  version(timeoutMs?: number): Promise<VersionResponse> {
    return this.call(this.runtime, 'Version', { version: 'v1' }, timeoutMs);
  }

  /** CRI Status, kubelet's readiness poll: the runtime's conditions (RuntimeReady, NetworkReady, …). */
  async status(timeoutMs?: number): Promise<RuntimeCondition[]> {
    return (await this.statusVerbose(false, timeoutMs)).conditions;
  }

  /**
   * CRI Status with containerd's info map when `verbose`: `cniconfig` (the loaded CNI config: plugin dirs, conf dir,
   * every network with its conflist's `Source` text) and `lastCNILoadStatus` ("OK" or the load error), both JSON.
   */
  async statusVerbose(verbose = true, timeoutMs?: number): Promise<{ conditions: RuntimeCondition[]; info: Record<string, string> }> {
    const r = await this.call<{ status: { conditions: RuntimeCondition[] }; info: Record<string, string> }>(
      this.runtime,
      'Status',
      { verbose },
      timeoutMs,
    );
    return { conditions: r.status.conditions, info: r.info ?? {} };
  }

  /** The NetworkReady condition of CRI Status (kubelet marks the node NotReady when it is false). */
  async networkReady(timeoutMs?: number): Promise<RuntimeCondition> {
    const c = (await this.status(timeoutMs)).find((x) => x.type === 'NetworkReady');
    if (!c) throw new Error('CRI Status has no NetworkReady condition');
    return c;
  }

  async runPodSandbox(config: PodSandboxConfig): Promise<string> {
    const r = await this.call<{ pod_sandbox_id: string }>(this.runtime, 'RunPodSandbox', { config, runtime_handler: '' });
    return r.pod_sandbox_id;
  }

  async stopPodSandbox(id: string): Promise<void> {
    await this.call(this.runtime, 'StopPodSandbox', { pod_sandbox_id: id });
  }

  async removePodSandbox(id: string): Promise<void> {
    await this.call(this.runtime, 'RemovePodSandbox', { pod_sandbox_id: id });
  }

  /** The status, and with `verbose` containerd's info document (pid, runtimeSpec with the netns path, …). */
  async podSandboxStatus(id: string, verbose = true): Promise<{ status: PodSandboxStatus; info: Record<string, any> }> {
    const r = await this.call<{ status: PodSandboxStatus; info: Record<string, string> }>(this.runtime, 'PodSandboxStatus', {
      pod_sandbox_id: id,
      verbose,
    });
    return { status: r.status, info: r.info?.info ? JSON.parse(r.info.info) : {} };
  }

  async listPodSandbox(): Promise<PodSandbox[]> {
    const r = await this.call<{ items: PodSandbox[] }>(this.runtime, 'ListPodSandbox', {});
    return r.items;
  }

  /** The image's id, or undefined when containerd does not have it. */
  async imageStatus(ref: string): Promise<string | undefined> {
    const r = await this.call<{ image: { id: string } | null }>(this.image, 'ImageStatus', { image: { image: ref }, verbose: false });
    return r.image?.id || undefined;
  }

  close(): void {
    this.runtime.close();
    this.image.close();
  }
}
