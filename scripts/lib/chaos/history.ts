import { readFileSync, writeFileSync } from "node:fs";

/**
 * What a client did and what it was told, one event per line (JSON Lines), in the spirit of Jepsen's
 * histories: each attempt is an `invoke`, then one completion with the same `op`:
 * - `ok`: an answer with a result (`value` is what the client was told);
 * - `fail`: a definite refusal (`value.code`): this attempt changed nothing;
 * - `info`: the outcome is unknown to the client: no answer (a timeout, an instance killed), a 5xx, a lost
 *   lease, or an answer thrown away after the server sent it. It may or may not have had its effect.
 * An invoke with no completion (the run stopped) reads as `info`.
 */
export type EventType = "invoke" | "ok" | "fail" | "info";

export interface HistoryEvent {
  /** The attempt: an invoke and its completion share it. */
  op: number;
  /** Who acted: `shopper 12`, `prober 0`, `recheck`. */
  process: string;
  type: EventType;
  /** The operation: a tRPC path, or `mockpay.confirm`. */
  f: string;
  /** The key the operation is idempotent on: a request id, a refund number, an order, a trade. */
  key: string;
  /** The shopper the session cookie named at the time (empty before the first answer made one). */
  user: string;
  value?: unknown;
  /** Milliseconds since the history began. */
  at: number;
}

/** An event as read back, with its line in the file (1-based): anomalies name them. */
export type HistoryLine = HistoryEvent & { line: number };

export interface Completion {
  ok(value: unknown, user: string): void;
  fail(code: string, user: string): void;
  info(why: Record<string, unknown>, user: string): void;
}

/** One process's view of the history: it starts attempts and completes them. */
export interface ProcessHistory {
  invoke(f: string, key: string, user: string, value: unknown): Completion;
}

export class History {
  private readonly events: HistoryEvent[] = [];
  private readonly started = Date.now();
  private nextOp = 1;

  for(process: string): ProcessHistory {
    return {
      invoke: (f, key, user, value) => {
        const op = this.nextOp++;
        this.push({ op, process, type: "invoke", f, key, user, value });
        let done = false;
        const complete = (type: EventType, value: unknown, user: string) => {
          if (done) return;
          done = true;
          this.push({ op, process, type, f, key, user, value });
        };
        return {
          ok: (value, user) => complete("ok", value, user),
          fail: (code, user) => complete("fail", { code }, user),
          info: (why, user) => complete("info", why, user),
        };
      },
    };
  }

  save(file: string): void {
    writeFileSync(file, this.events.map((event) => `${JSON.stringify(event)}\n`).join(""));
  }

  private push(event: Omit<HistoryEvent, "at">): void {
    this.events.push({ ...event, at: Date.now() - this.started });
  }
}

/** Reads a history file back, numbering its lines; a line that is not an event is an error. */
export function readHistory(file: string): HistoryLine[] {
  return parseHistory(readFileSync(file, "utf8"));
}

export function parseHistory(text: string): HistoryLine[] {
  return text
    .split("\n")
    .map((raw, index) => ({ raw, line: index + 1 }))
    .filter(({ raw }) => raw.trim() !== "")
    .map(({ raw, line }) => {
      const event = JSON.parse(raw) as HistoryEvent;
      if (typeof event.op !== "number" || typeof event.key !== "string" || typeof event.f !== "string")
        throw new Error(`history line ${line} is not an event: ${raw.slice(0, 120)}`);
      return { ...event, line };
    });
}
