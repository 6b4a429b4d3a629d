import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import { eq, sql } from "drizzle-orm";
import { Logger, run, type WorkerEvents } from "graphile-worker";
import type { Logger as Pino } from "pino";
import type { Db } from "~/server/db/client";
import { outboxEvent } from "~/server/db/schema";
import type { Observer } from "~/server/observability/observer";
import { type RefundDeps, submitPendingRefunds } from "~/server/refunds/submit";
import { every } from "~/shared/periodic";
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
  /** How often this process proves its workers alive, and looks for jobs of dead ones (default 2 s). */
  heartbeatMs?: number;
}

/** A worker silent for this many heartbeats is dead; its locked jobs go back to the queue. */
const MISSED_BEATS = 5;

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
  const events: WorkerEvents = new EventEmitter();
  // Jobs are locked in the name of the worker *pool* (locked_by = "pool-…"), not of its workers: the pool's
  // id is what the heartbeat must vouch for, or a live pool's long-running job would be taken from it.
  const poolIds = new Set<string>();
  events.on("pool:create", ({ workerPool }) => poolIds.add(workerPool.id));
  events.on("pool:release", ({ workerPool }) => poolIds.delete(workerPool.id));
  const runner = await run({
    connectionString: options.connectionString,
    concurrency: options.concurrency,
    noHandleSignals: true,
    events,
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
  // A relay takes milliseconds; one stuck on a dead connection is given up on quickly.
  const relay = every(options.relayIntervalMs, () => relayOutbox(db), {
    name: "outbox relay",
    log: options.log,
    deadlineMs: 10_000,
  });
  const refunds = options.refunds;
  const submitter = refunds
    ? every(refunds.intervalMs, () => submitPendingRefunds(db, refunds), {
        name: "refund submitter",
        log: options.log,
      })
    : undefined;
  const heartbeatMs = options.heartbeatMs ?? 2_000;
  const heartbeat = every(
    heartbeatMs,
    async () => {
      const reclaimed = await beatAndReclaim(db, [...poolIds], heartbeatMs * MISSED_BEATS);
      if (reclaimed.length > 0) options.log.warn({ workers: reclaimed }, "unlocked the jobs of dead workers");
    },
    // Well inside the time after which the others would take this worker for dead.
    { name: "worker heartbeat", log: options.log, deadlineMs: heartbeatMs * 2 },
  );
  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= (async () => {
        clearInterval(relay);
        clearInterval(heartbeat);
        if (submitter) clearInterval(submitter);
        // Stops taking jobs and waits for the running ones; a second signal must not throw.
        await runner.stop().catch((err: unknown) => options.log.debug({ err }, "worker already stopped"));
        await db
          .execute(sql`DELETE FROM worker_heartbeat WHERE process = ${PROCESS}`)
          .catch((err: unknown) => options.log.debug({ err }, "could not remove heartbeats"));
      })();
      return stopping;
    },
  };
}

const PROCESS = `${hostname()}:${process.pid}`;

/**
 * Proves this process's workers alive, then hands back to the queue every job
 * still locked by a worker that stopped beating — a process that was killed
 * (graphile-worker unlocks a crashed worker's jobs only after four hours). Its
 * consumers then run again elsewhere and find their consume records: at least
 * once, effects exactly once.
 */
export async function beatAndReclaim(db: Db, workerIds: string[], deadAfterMs: number): Promise<string[]> {
  if (workerIds.length > 0) {
    await db.execute(sql`
      INSERT INTO worker_heartbeat (worker_id, process, beat_at)
      SELECT id, ${PROCESS}, now() FROM unnest(${sql.param(workerIds)}::text[]) AS id
      ON CONFLICT (worker_id) DO UPDATE SET beat_at = now()`);
  }
  const dead = await db.execute<{ locked_by: string }>(sql`
    SELECT DISTINCT j.locked_by FROM graphile_worker._private_jobs j
     WHERE j.locked_by IS NOT NULL
       AND j.locked_at < now() - ${deadAfterMs} * interval '1 millisecond'
       AND NOT EXISTS (SELECT 1 FROM worker_heartbeat h
                        WHERE h.worker_id = j.locked_by
                          AND h.beat_at > now() - ${deadAfterMs} * interval '1 millisecond')`);
  const ids = dead.map((row) => row.locked_by);
  if (ids.length > 0) {
    await db.execute(sql`SELECT graphile_worker.force_unlock_workers(${sql.param(ids)}::text[])`);
  }
  // Workers that are gone (stopped, crashed, reclaimed) leave rows behind; keep the table small.
  await db.execute(sql`DELETE FROM worker_heartbeat WHERE beat_at < now() - interval '1 hour'`);
  return ids;
}
