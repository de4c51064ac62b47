// What residue's backend choice (src/residue/backends.ts) asks of the node, and src/effects/ebtables-probe.ts
// answers from files: where a program resolves to, and whether the kernel can serve a table.

/** yes: the kernel has it now; no: it cannot (until a module is loaded / another kernel); unknown: could not tell. */
interface KernelFact {
  has: 'yes' | 'no' | 'unknown';
  /** The file evidence, for logs and reports. */
  evidence: string;
}

/** What a backend needs in the kernel: the module (modular kernels) or the config symbol (monolithic ones). */
export interface KernelNeed {
  module: string;
  config: string;
}

export interface BackendProbe {
  /** The resolved path of `name` found on PATH, or undefined when it is not installed. */
  program(name: string): string | undefined;
  kernel(need: KernelNeed): KernelFact;
}
