// A neighbour (ARP/NDP) entry as src/effects/neigh.ts reads it; residue decides on it (src/residue/).

export interface Neighbour {
  /** Normalised address (canonical IPv6). */
  ip: string;
  dev: string;
  /** Lowercase, zero-padded; absent for INCOMPLETE/FAILED entries. */
  mac?: string;
  /** As iproute2 reports it, e.g. ["PERMANENT"], ["REACHABLE"], ["STALE"]. */
  state: string[];
}
