/**
 * A count taken once requests still in flight when a load stopped have committed: asked again every 200 ms
 * until it stops changing (at most 10 s).
 */
export function settledCount(count: (query: string) => Promise<number>) {
  return async (query: string) => {
    let last = -1;
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await count(query);
      if (now === last) return now;
      last = now;
    }
    return last;
  };
}
