import { LRUCache } from "lru-cache";

/**
 * Each app instance answers replays from memory when it can (docs/idempotency.md, "The replay cache").
 *
 * Why it is safe: a record that is SUCCESS or FAILED never changes before it expires. Nothing updates it
 * (a takeover needs PROCESSING, a renewal needs an expired record) and cleanup deletes only expired records.
 * So an outcome read from the database, or just committed, is the answer until `expires_at`, on every
 * instance. An entry is served only until shortly before that moment, measured on this process's
 * monotonic clock from the database's own arithmetic (never by comparing two clocks): when the key has
 * expired, or been cleaned up and used again, the request goes to the database like any other.
 *
 * It also holds the requests in flight per key: a duplicate arriving while the same key runs on this
 * instance waits for it instead of taking a database connection, then finds the outcome here.
 */
export interface CachedOutcome {
  fingerprint: string;
  status: "SUCCESS" | "FAILED";
  /** The stored answer, parsed from the stored text: exactly what a database replay would return. */
  responseBody: unknown;
  /** The shape it was stored in: a replay from here is upgraded like one from the record. */
  answerVersion: number;
  bizId: string | null;
  expiresAt: Date;
  /** performance.now() after which the entry is not served (before the key's expiry, with a margin). */
  servedUntil: number;
  /** What the entry counts for in the cache's size (its key, its answer, its renderings). */
  size: number;
  /** Transports' renderings of this outcome, by the request text that was answered with it (`rendered`). */
  renderings?: Map<string, unknown>;
}

export interface ReplayCacheOptions {
  /** How many keys' outcomes are kept (least recently used go first). */
  maxEntries: number;
  /** Upper bound on the stored answers' size, in characters of their JSON. */
  maxChars: number;
  /** Stop serving an entry this long before its key expires. */
  marginMs: number;
  /** Renderings kept per outcome (one per distinct request text that meant the same request). */
  maxRenderings: number;
  /** Larger request texts and renderings than this (characters) are not kept. */
  maxRenderingChars: number;
}

export const DEFAULT_REPLAY_CACHE_OPTIONS: ReplayCacheOptions = {
  maxEntries: 20_000,
  maxChars: 16 * 1024 * 1024,
  marginMs: 2_000,
  maxRenderings: 4,
  maxRenderingChars: 16 * 1024,
};

export class ReplayCache {
  private readonly outcomes: LRUCache<string, CachedOutcome>;
  private readonly flights = new Map<string, Promise<void>>();

  constructor(readonly options: ReplayCacheOptions = DEFAULT_REPLAY_CACHE_OPTIONS) {
    this.outcomes = new LRUCache<string, CachedOutcome>({
      max: options.maxEntries,
      maxSize: options.maxChars,
      sizeCalculation: (value) => value.size,
    });
  }

  /** The outcome stored under this key, if this instance knows it and the key has not (nearly) expired. */
  get(key: string): CachedOutcome | undefined {
    const entry = this.outcomes.get(key);
    if (!entry) return undefined;
    if (performance.now() >= entry.servedUntil) {
      this.outcomes.delete(key);
      return undefined;
    }
    return entry;
  }

  /**
   * Keeps an outcome. `remainingMs` is how long the key still lives as the database computed it, and
   * `askedAt` the performance.now() before the statement that computed it was sent: the key cannot expire
   * before askedAt + remainingMs on this clock.
   */
  put(
    key: string,
    outcome: Omit<CachedOutcome, "servedUntil" | "size" | "renderings">,
    askedAt: number,
    remainingMs: number,
    chars: number,
  ): void {
    const servedUntil = askedAt + remainingMs - this.options.marginMs;
    if (servedUntil <= performance.now()) return;
    const size = key.length + chars + 64;
    this.outcomes.set(key, { ...outcome, servedUntil, size }, { size });
  }

  /**
   * A known replay (docs/idempotency.md, "Known replays"): the rendering a transport kept for exactly this
   * request text under this key, while the key's success is served. The same text under the same key (and
   * so the same scope and operation) is the same input, so the same fingerprint and the same answer: the
   * transport answers it without parsing, validating or hashing the request again.
   */
  rendered(key: string, requestText: string): { outcome: CachedOutcome; rendering: unknown } | undefined {
    const outcome = this.get(key);
    const rendering = outcome?.renderings?.get(requestText);
    return outcome && rendering !== undefined ? { outcome, rendering } : undefined;
  }

  /**
   * Keeps a transport's rendering of a success under the request text it answered, if this instance still
   * holds that success for the same request (`fingerprint`): a text that meant another request, or a key
   * expired or used again since, keeps nothing. At most `maxRenderings` texts per key; large ones are not kept.
   */
  keepRendering(
    key: string,
    fingerprint: string,
    requestText: string,
    rendering: unknown,
    renderingChars: number,
  ): void {
    const outcome = this.get(key);
    if (outcome?.status !== "SUCCESS" || outcome.fingerprint !== fingerprint) return;
    const chars = requestText.length + renderingChars;
    if (chars > this.options.maxRenderingChars) return;
    outcome.renderings ??= new Map();
    if (outcome.renderings.has(requestText) || outcome.renderings.size >= this.options.maxRenderings) return;
    outcome.renderings.set(requestText, rendering);
    outcome.size += chars + 64;
    // Counted in the cache's bound like the answer itself (set again: lru-cache sizes an entry when it is set).
    this.outcomes.set(key, outcome, { size: outcome.size });
  }

  /** Forgets everything (tests). */
  clear(): void {
    this.outcomes.clear();
  }

  get size(): number {
    return this.outcomes.size;
  }

  /**
   * Boards this key's flight on this instance. The first call leads it: it runs, and calls `land()` when its run
   * has ended, whatever its outcome. A call that finds the key running gets `landed`: true once that run ended
   * (it looks at the cache again), false once `waitMs` passed first (it answers that the key is still in
   * progress).
   */
  board(key: string, waitMs = Number.POSITIVE_INFINITY): { land: () => void } | { landed: Promise<boolean> } {
    const running = this.flights.get(key);
    if (running) return { landed: landedWithin(running, waitMs) };
    let landing: () => void = () => {};
    this.flights.set(key, new Promise<void>((resolve) => (landing = resolve)));
    return {
      land: () => {
        this.flights.delete(key);
        landing();
      },
    };
  }
}

/** True once the flight lands, false once `waitMs` passed first (the call's wait for a holder elsewhere is bounded the same way). */
async function landedWithin(flight: Promise<void>, waitMs: number): Promise<boolean> {
  if (!Number.isFinite(waitMs)) {
    await flight;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const landed = await Promise.race([
    flight.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), waitMs);
    }),
  ]);
  clearTimeout(timer);
  return landed;
}

/** The cache key of a record: whose, which operation, which key, and the request's fingerprint. */
export function cacheKeyOf(scope: string, bizType: string, key: string): string {
  return `${scope}\u0000${bizType}\u0000${key}`;
}
