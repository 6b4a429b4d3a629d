import { eq } from "drizzle-orm";
import { Logger, run } from "graphile-worker";
import type { Logger as Pino } from "pino";
import type { Db } from "../db/client";
import { outboxEvent } from "../db/schema";
import type { Observer } from "../observability/observer";
import { type RefundDeps, submitPendingRefunds } from "../refunds/submit";
import { type ConsumeHooks, consumeOnce } from "./consume";
import { consumerNamed } from "./consumers";
import { CONSUME_TASK, type ConsumeJob, relayOutbox } from "./relay";

export interface WorkerOptions {
  connectionString: string;
  concurrency: number;
  /** How often the outbox relay looks for unpublished events. */
  relayIntervalMs: number;
  pollIntervalMs?: number;
  hooks?: ConsumeHooks;
  /** Where to send refunds still REFUND_CREATED (automatic refunds, lost answers). */
  refunds?: RefundDeps & { intervalMs: number };
  log: Pino;
  observer?: Observer;
}

export interface RunningWorker {
  stop(): Promise<void>;
}

/** Handles one queued delivery: load the event, run the named consumer once. */
export async function handleConsumeJob(db: Db, job: ConsumeJob, hooks?: ConsumeHooks) {
  return (await consumeJob(db, job, hooks)).outcome;
}

async function consumeJob(db: Db, job: ConsumeJob, hooks?: ConsumeHooks) {
  const consumer = consumerNamed(job.consumer);
  if (!consumer) throw new Error(`unknown consumer ${job.consumer}`);
  const [event] = await db.select().from(outboxEvent).where(eq(outboxEvent.id, job.eventId));
  if (!event) throw new Error(`unknown event ${job.eventId}`);
  return { event, outcome: await consumeOnce(db, event, consumer, hooks) };
}

/**
 * The event worker: graphile-worker runs the consumer jobs (retries with
 * exponential backoff, dead letters after MAX_ATTEMPTS); a timer relays the
 * outbox into the queue. Runs inside the app or as `npm run worker`, any
 * number at once.
 */
export async function startWorker(db: Db, options: WorkerOptions): Promise<RunningWorker> {
  const logger = new Logger(() => (level, message, meta) => {
    const method = level === "error" ? "error" : level === "warning" ? "warn" : "debug";
    options.log[method]({ ...meta, component: "graphile-worker" }, message);
  });
  const runner = await run({
    connectionString: options.connectionString,
    concurrency: options.concurrency,
    noHandleSignals: true,
    pollInterval: options.pollIntervalMs ?? 1000,
    logger,
    taskList: {
      [CONSUME_TASK]: async (payload) => {
        const job = payload as ConsumeJob;
        const { event, outcome } = await consumeJob(db, job, options.hooks);
        options.observer?.consumed({
          eventId: job.eventId,
          eventType: event.eventType,
          consumer: job.consumer,
          outcome,
        });
      },
    },
  });
  let relaying = false;
  const relay = setInterval(() => {
    if (relaying) return;
    relaying = true;
    relayOutbox(db)
      .catch((err: unknown) => options.log.warn({ err }, "outbox relay failed; will retry"))
      .finally(() => {
        relaying = false;
      });
  }, options.relayIntervalMs);
  relay.unref();
  const refunds = options.refunds;
  const submitter = refunds
    ? setInterval(() => {
        submitPendingRefunds(db, refunds).catch((err: unknown) =>
          options.log.warn({ err }, "refund submission failed; will retry"),
        );
      }, refunds.intervalMs)
    : undefined;
  submitter?.unref();
  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= (async () => {
        clearInterval(relay);
        if (submitter) clearInterval(submitter);
        // Stops taking jobs and waits for the running ones; a second signal must not throw.
        await runner.stop().catch((err: unknown) => options.log.debug({ err }, "worker already stopped"));
      })();
      return stopping;
    },
  };
}
