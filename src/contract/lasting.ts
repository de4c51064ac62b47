// Lasting conditions the agent's steps log once when they start and once when they end (src/agent/problems.ts does
// the same for failed steps): a pass every 30 s would otherwise repeat the same line all day.
/**
 * Lasting conditions of one kind, each told by a key (a rogue cache entry naming the node's address, a route that
 * captures a reserved subnet): `update` with what holds this pass answers which started and which ended, so the
 * caller logs each once when it starts and once when it ends, not every pass.
 */
export class Lasting<T> {
  private readonly holding = new Map<string, { item: T; since: string }>();

  constructor(private readonly keyOf: (item: T) => string) {}

  update(now: readonly T[]): { started: T[]; ended: Array<T & { since: string }> } {
    const seen = new Map(now.map((i) => [this.keyOf(i), i] as const));
    const started = [...seen].filter(([k]) => !this.holding.has(k)).map(([, i]) => i);
    const ended: Array<T & { since: string }> = [];
    for (const [k, h] of this.holding) {
      if (seen.has(k)) continue;
      this.holding.delete(k);
      ended.push({ ...h.item, since: h.since });
    }
    const since = new Date().toISOString();
    for (const [k, i] of seen) if (!this.holding.has(k)) this.holding.set(k, { item: i, since });
    return { started, ended };
  }

  /** What holds now. */
  current(): T[] {
    return [...this.holding.values()].map((h) => h.item);
  }
}
