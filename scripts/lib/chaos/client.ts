import type { Cluster } from "./cluster";
import type { Faults } from "./report";
import type { Rng } from "./rng";
import type { WriteLog } from "./write-log";

export interface TrpcError {
  message: string;
  data: { code: string; httpStatus: number; domainCode: string | null };
}

export type Answer<T> = { ok: true; value: T } | { ok: false; error: TrpcError };

/** Codes after which a client sends the same request again, with the same key. */
const RETRYABLE = new Set([
  "REQUEST_IN_PROGRESS",
  "IDEMPOTENCY_LEASE_LOST",
  "SERVICE_UNAVAILABLE",
  "RATE_LIMITED",
]);

export class GaveUp extends Error {}

/** The value of the first successful answer. */
export function firstValue<T>(answers: Answer<T>[]): T | undefined {
  for (const answer of answers) if (answer.ok) return answer.value;
  return undefined;
}

/**
 * One shopper's browser, as far as the server can tell: a session cookie, tRPC
 * over HTTP, and a client that retries what is worth retrying with the same
 * key. Each request goes to one of the instances (a load balancer's pick), and
 * to the other when that one does not answer.
 */
export class ChaosClient {
  private cookie = "";
  /** Answers that were 5xx other than 503: internal errors, which must never happen. */
  readonly internalErrors: string[] = [];
  /** A server that handed an existing shopper a new session (it would lose its orders). */
  readonly sessionChanges: string[] = [];

  constructor(
    private readonly cluster: Cluster,
    private readonly rng: Rng,
    private readonly faults: Faults,
    private readonly writes?: WriteLog,
  ) {}

  /** The session cookie (to come back as the same shopper later). */
  get session(): string {
    return this.cookie;
  }

  /** Carries on as the shopper whose session this is. */
  resume(session: string): this {
    this.cookie = session;
    return this;
  }

  /** The first request makes the session. */
  async visit(): Promise<void> {
    await this.query("catalog.list", undefined);
  }

  /** The shopper's id, as the session cookie carries it (the harness checks the database by it). */
  get userId(): string {
    return decodeURIComponent(this.cookie.split("=")[1] ?? "").split(".")[0] ?? "";
  }

  query<T>(path: string, input: unknown): Promise<Answer<T>> {
    const search = input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify({ json: input }))}`;
    return this.withRetries(path, undefined, false, (base) =>
      this.send<T>(`${base}/api/trpc/${path}${search}`, { method: "GET" }),
    );
  }

  /**
   * A mutation until it gets a final answer (a result or a business refusal).
   * `loseFirstAnswer`: the first answer is thrown away as if the connection had
   * dropped after the server committed, so the client sends the request again.
   */
  async mutate<T>(
    path: string,
    input: unknown,
    options: { loseFirstAnswer?: boolean; instance?: number } = {},
  ): Promise<Answer<T>> {
    let lose = options.loseFirstAnswer ?? false;
    for (;;) {
      const answer = await this.withRetries(path, options.instance, true, (base) =>
        this.send<T>(`${base}/api/trpc/${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ json: input }),
        }),
      );
      if (!lose) return answer;
      lose = false;
      this.faults.count("response lost after the server answered (client retries)");
    }
  }

  /**
   * A plain HTTP call to the app (MockPay's pages and forms), with the same
   * failover; like a person in front of an error page, it tries again until the
   * answer has the expected status. Returns the body.
   */
  async http(path: string, init: RequestInit, expected: number): Promise<string> {
    return (await this.httpAnswer(path, init, [expected])).body;
  }

  /** As `http`, accepting any of several statuses (a final answer the shopper understands); says which came. */
  async httpAnswer(
    path: string,
    init: RequestInit,
    expected: number[],
  ): Promise<{ status: number; body: string }> {
    const write = init.method === "POST";
    const began = Date.now();
    let failed = false;
    for (let attempt = 0; ; attempt++) {
      const base = this.cluster.url(this.rng.int(0, 1) + attempt);
      let status: number | string;
      try {
        const response = await fetch(`${base}${path}`, {
          ...init,
          redirect: "manual",
          signal: AbortSignal.timeout(15_000),
        });
        // The body is read here too: an instance killed mid-answer fails the read, not just the fetch.
        const text = await response.text();
        if (expected.includes(response.status)) {
          if (write)
            this.writes?.record({ what: path.split("?")[0] ?? path, from: began, to: Date.now(), failed });
          return { status: response.status, body: text };
        }
        if (response.status >= 500) failed = true;
        status = response.status;
        this.faults.count(`page answered ${status} (shopper tries again)`);
      } catch (error) {
        failed = true;
        status = String(error);
        this.faults.count("instance unreachable (client tries the other)");
      }
      if (attempt >= 40) throw new GaveUp(`${path}: ${status}`);
      await sleep(100 + Math.min(attempt, 10) * 50);
    }
  }

  private async withRetries<T>(
    path: string,
    instance: number | undefined,
    write: boolean,
    attempt: (base: string) => Promise<Answer<T>>,
  ): Promise<Answer<T>> {
    const began = Date.now();
    let failed = false;
    const done = (answer: Answer<T>) => {
      if (write) this.writes?.record({ what: path, from: began, to: Date.now(), failed });
      return answer;
    };
    for (let tries = 0; ; tries++) {
      // The instance asked for first (else either), then the other one on each retry.
      const base = this.cluster.url((instance ?? this.rng.int(0, 1)) + tries);
      let answer: Answer<T> | undefined;
      try {
        answer = await attempt(base);
      } catch (error) {
        failed = true;
        if (tries >= 60) throw new GaveUp(`${path}: ${String(error)}`);
        this.faults.count("instance unreachable (client tries the other)");
        await sleep(100 + Math.min(tries, 10) * 50);
        continue;
      }
      if (answer.ok) return done(answer);
      const code = answer.error.data.domainCode ?? answer.error.data.code;
      if (!RETRYABLE.has(code)) return done(answer);
      // The database away (a failover): not a duplicate waiting for its first copy.
      if (code === "SERVICE_UNAVAILABLE") failed = true;
      if (tries >= 60) throw new GaveUp(`${path}: still ${code}`);
      this.faults.count(`client retry after ${code}`);
      await sleep(code === "RATE_LIMITED" ? 1_000 : 50 + Math.min(tries, 10) * 50);
    }
  }

  private async send<T>(url: string, init: RequestInit): Promise<Answer<T>> {
    const response = await fetch(url, {
      ...init,
      headers: {
        ...(init.headers as Record<string, string>),
        ...(this.cookie ? { cookie: this.cookie } : {}),
      },
      signal: AbortSignal.timeout(15_000),
    });
    const set = response.headers.get("set-cookie");
    if (set) {
      const next = set.split(";")[0] ?? "";
      if (this.cookie && next !== this.cookie)
        this.sessionChanges.push(`${url.split("?")[0]}: got a new session`);
      this.cookie = next;
    }
    const text = await response.text();
    let body: { result?: { data: { json: T } }; error?: { json: TrpcError } };
    try {
      body = JSON.parse(text);
    } catch {
      // A proxy or a dying process, not tRPC: the same as no answer.
      throw new Error(`HTTP ${response.status}: ${text.slice(0, 80)}`);
    }
    if (body.result) return { ok: true, value: body.result.data.json };
    const error = body.error?.json;
    if (!error) throw new Error(`HTTP ${response.status} without a tRPC body`);
    if (error.data.httpStatus >= 500 && error.data.httpStatus !== 503) {
      this.internalErrors.push(`${url.split("/api/trpc/")[1]?.split("?")[0]}: ${error.message}`);
    }
    return { ok: false, error };
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
