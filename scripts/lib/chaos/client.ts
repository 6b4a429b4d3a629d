import type { Cluster } from "./cluster";
import type { Completion, ProcessHistory } from "./history";
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
/** Answers that leave the outcome unknown to the client (the request may have had its effect, or not). */
const UNKNOWN_OUTCOME = new Set(["IDEMPOTENCY_LEASE_LOST", "SERVICE_UNAVAILABLE"]);

/**
 * The key an operation is idempotent on, for the history (undefined: not logged). Creating an order and a
 * refund are keyed by the client; cancelling, paying and asking the provider by the order; a Confirm at
 * MockPay by the trade.
 */
function historyKey(path: string, input: unknown): string | undefined {
  const fields = (input ?? {}) as Record<string, unknown>;
  if (path === "orders.create") return String(fields.requestId);
  if (path === "refunds.create") return String(fields.refundNo);
  if (["orders.cancel", "payments.create", "payments.checkStatus"].includes(path))
    return String(fields.orderId);
  return undefined;
}
const CONFIRM = /^\/provider\/api\/trades\/([^/]+)\/confirm$/;

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
    private readonly history?: ProcessHistory,
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
      const losing = lose;
      const answer = await this.withRetries(path, options.instance, true, (base) =>
        this.logged(path, input, losing, () =>
          this.send<T>(`${base}/api/trpc/${path}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ json: input }),
          }),
        ),
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
    const trade = write ? CONFIRM.exec(path)?.[1] : undefined;
    const began = Date.now();
    let failed = false;
    for (let attempt = 0; ; attempt++) {
      const base = this.cluster.url(this.rng.int(0, 1) + attempt);
      let status: number | string;
      const op = trade
        ? this.history?.invoke("mockpay.confirm", decodeURIComponent(trade), this.userId, {})
        : undefined;
      try {
        const response = await fetch(`${base}${path}`, {
          ...init,
          redirect: "manual",
          signal: AbortSignal.timeout(15_000),
        });
        // The body is read here too: an instance killed mid-answer fails the read, not just the fetch.
        const text = await response.text();
        // 303: MockPay took the Confirm (the trade is paid, or was closed); 410 and other 4xx: refused.
        if (response.status === 303) op?.ok({ status: 303 }, this.userId);
        else if (response.status >= 500) op?.info({ status: response.status }, this.userId);
        else op?.fail(String(response.status), this.userId);
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
        op?.info({ error: status.slice(0, 160) }, this.userId);
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

  /**
   * One attempt, written to the history: invoked, then answered (ok), refused (fail) or left unknown (info).
   * `losing`: the answer is about to be thrown away, so the client is told nothing (info), unless it is one
   * the client retries anyway.
   */
  private async logged<T>(
    path: string,
    input: unknown,
    losing: boolean,
    send: () => Promise<Answer<T>>,
  ): Promise<Answer<T>> {
    const key = historyKey(path, input);
    const op: Completion | undefined =
      key === undefined ? undefined : this.history?.invoke(path, key, this.userId, input);
    let answer: Answer<T>;
    try {
      answer = await send();
    } catch (error) {
      op?.info({ error: String(error).slice(0, 160) }, this.userId);
      throw error;
    }
    if (!op) return answer;
    const code = answer.ok ? undefined : (answer.error.data.domainCode ?? answer.error.data.code);
    if (losing && (code === undefined || !RETRYABLE.has(code)))
      op.info({ lost: "the answer was thrown away after the server sent it" }, this.userId);
    else if (code === undefined) op.ok(answer.ok ? answer.value : undefined, this.userId);
    else if (UNKNOWN_OUTCOME.has(code) || (!answer.ok && answer.error.data.httpStatus >= 500))
      op.info({ code }, this.userId);
    else op.fail(code, this.userId);
    return answer;
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
