import { EventEmitter } from "node:events";
import { and, eq, sql } from "drizzle-orm";
import { Logger, type Runner, run, type WorkerEvents } from "graphile-worker";
import type { Logger as Pino } from "pino";
import type { Db } from "~/server/db/client";
import { outboxEvent } from "~/server/db/schema";
import type { Observer } from "~/server/observability/observer";
import { type RefundDeps, submitPendingRefunds } from "~/server/refunds/submit";
import { every } from "~/shared/periodic";
import { type ConsumeHooks, consumeOnce } from "./consume";
import { consumerNamed } from "./consumers";
import { beatAndReclaim, PROCESS, unlockOrphans } from "./heartbeat";
import { measured, type PeriodicTask } from "./periodic-task";
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
  /**
   * Liveness, judged by work done rather than by the process: a runner that shows no sign of life for this
   * long (no job finished, no poll that found the queue empty), that has run one job this long, or one of
   * whose polls for a job has waited this long, is stuck and is replaced (default 30 s).
   */
  stallMs?: number;
  /**
   * Called when replacing the runner did not help (stuck again `MAX_REPLACEMENTS` times with no job finished
   * in between: what it shares with the rest of the process is stuck too, e.g. connections hung by a failover).
   * The worker script exits, so that its supervisor starts it afresh. Absent: the runner is replaced again.
   */
  onGiveUp?: (reason: string) => void;
  /**
   * How long stop() waits for the job runner to finish its running jobs and close its pool (default 10 s). A
   * runner whose connections hang never does: past this, stop() goes on without it (its jobs are reclaimed
   * by the other workers' heartbeat, as a dead worker's are) rather than never returning.
   */
  stopTimeoutMs?: number;
  /**
   * Other periodic work this process does while it runs (src/server/merchant-jobs.ts hands it the periodic tasks): each
   * run once at start and then every `everyMs`, one run at a time, given up on past its deadline (default 5
   * minutes).
   */
  background?: PeriodicTask[];
}

/** Stuck runners replaced in a row, with no job finished in between, before the worker gives up (onGiveUp). */
const MAX_REPLACEMENTS = 2;

/** A worker silent for this many heartbeats is dead; its locked jobs go back to the queue. */
const MISSED_BEATS = 5;

export interface RunningWorker {
  stop(): Promise<void>;
  /** The graphile-worker runner now taking jobs (replaced when one stops by itself); for tests. */
  currentRunner(): Runner | undefined;
}

/** Handles one queued delivery: load the event, run the named consumer once. */
export async function handleConsumeJob(db: Db, job: ConsumeJob, hooks?: ConsumeHooks) {
  return (await consumeJob(db, job, hooks)).outcome;
}

async function consumeJob(db: Db, job: ConsumeJob, hooks?: ConsumeHooks) {
  const consumer = consumerNamed(job.consumer);
  if (!consumer) throw new Error(`unknown consumer ${job.consumer}`);
  const [event] = await db
    .select()
    .from(outboxEvent)
    .where(
      job.userId === undefined
        ? eq(outboxEvent.id, job.eventId)
        : and(eq(outboxEvent.userId, job.userId), eq(outboxEvent.id, job.eventId)),
    );
  if (!event) throw new Error(`unknown event ${job.eventId}`);
  return { event, outcome: await consumeOnce(db, event, consumer, hooks) };
}

/** How long a new job runner may take to show its first sign (a poll answered) before it is judged stuck. */
const STARTUP_ALLOWANCE_MS = 10_000;
/** A runner that failed to get a job this often in a row, for this long, is replaced (see startWorker). */
const GET_JOB_STUCK_FAILURES = 10;
const GET_JOB_STUCK_MS = 3_000;

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
  // The jobs this process is running now: a job locked by one of our pools but not running here lost its
  // outcome write, and would stay locked (graphile-worker frees stale locks after four hours).
  // When each started (the liveness check below reads how long the oldest has run).
  const running = new Map<string, number>();
  events.on("job:start", ({ job }) => running.set(String(job.id), Date.now()));
  events.on("job:complete", ({ job }) => running.delete(String(job.id)));
  // The pool of the runner taking jobs now: a runner replaced as stuck is no longer vouched for, so the jobs
  // it holds go back to the queue even if it never lets go of them itself.
  let currentPool: string | undefined;
  // Signs of life: a job finished, or a poll that found nothing to do. Stuck runners replaced since a job
  // last finished.
  const stallMs = options.stallMs ?? 30_000;
  let lastSign = Date.now();
  /** Whether the current runner (the one taking jobs) has shown any sign yet (its first poll needs new connections). */
  let signedSinceStart = false;
  let replacements = 0;
  events.on("worker:getJob:empty", () => {
    lastSign = Date.now();
    signedSinceStart = true;
  });
  events.on("job:complete", () => {
    lastSign = Date.now();
    signedSinceStart = true;
    replacements = 0;
  });
  // The polls of the runner taking jobs now, by worker, and how long each may wait. One loop of a runner can
  // hang on a connection that went silent while the others go on with new ones: jobs still finish, so the
  // signs above keep coming, but that loop never takes a job again. A poll started before the runner's first
  // sign may be waiting for a connection to open, and is given the startup allowance.
  const polls = new Map<string, { since: number; allowanceMs: number }>();
  events.on("pool:create", ({ workerPool }) => {
    currentPool = workerPool.id;
    signedSinceStart = false;
    polls.clear();
  });
  const pollDone = ({ worker }: { worker: { workerId: string } }) => polls.delete(worker.workerId);
  events.on("worker:getJob:start", ({ worker }) => {
    if (worker.workerPool.id !== currentPool) return;
    const allowanceMs = signedSinceStart ? stallMs : Math.max(stallMs, STARTUP_ALLOWANCE_MS);
    polls.set(worker.workerId, { since: Date.now(), allowanceMs });
  });
  events.on("worker:getJob:empty", pollDone);
  events.on("worker:getJob:error", pollDone);
  events.on("job:start", pollDone);
  // graphile-worker 0.17 shuts its own pool down when it cannot record a job's outcome after its retries
  // ("Could not completeJobs; queue is in an inconsistent state; aborting"), as a storm of dropped
  // connections can make it do. The process would go on, silent, with nothing taking jobs: so a runner
  // that ends without our stop() is replaced. Its locked jobs are reclaimed by the heartbeat below,
  // which stops vouching for a released pool.
  let stopped = false;
  let runner: Runner | undefined;
  let restarts = 0;
  // A runner can also go on without taking a job ever again: when a dropped connection leaves a broken
  // client in graphile-worker's pool, every "get job" fails with the same error, forever ("Failed to acquire
  // job … (204 contiguous fails)"), and the pool does not end. Seen when the LISTEN connection and the pool's
  // were all dropped while jobs were queued (test/worker-recovery.test.ts). So a runner that has failed to get
  // a job for GET_JOB_STUCK_MS, at least GET_JOB_STUCK_FAILURES times in a row, is stopped and replaced with
  // a new one (and a new pool).
  let getJobFailures = 0;
  let failingSince = 0;
  events.on("worker:getJob:empty", () => {
    getJobFailures = 0;
  });
  events.on("job:start", () => {
    getJobFailures = 0;
  });
  events.on("worker:getJob:error", ({ error }) => {
    if (getJobFailures++ === 0) failingSince = Date.now();
    const stuck = runner;
    if (!stuck || getJobFailures < GET_JOB_STUCK_FAILURES || Date.now() - failingSince < GET_JOB_STUCK_MS)
      return;
    getJobFailures = 0;
    options.log.error({ err: error }, "the job runner cannot get jobs any more; replacing it");
    void stuck
      .stop()
      .catch((err: unknown) => options.log.debug({ err }, "stuck runner did not stop cleanly"));
  });
  const startRunner = async (): Promise<void> => {
    const started = await run({
      connectionString: options.connectionString,
      concurrency: options.concurrency,
      noHandleSignals: true,
      events,
      pollInterval: options.pollIntervalMs ?? 1000,
      logger,
      // Without batching, 0.17 records a job's outcome fire-and-forget: when that write fails (a dropped
      // connection), the rejection goes unhandled and the job stays locked by a live pool for four
      // hours. Batched, the write is retried (20 times, backing off to 30 s) and a final failure ends
      // the pool, which the supervisor below replaces.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      taskList: {
        [CONSUME_TASK]: async (payload) => {
          const job = payload as ConsumeJob;
          const { event, outcome } = await consumeJob(db, job, options.hooks);
          options.observer?.consumed({
            userId: event.userId,
            eventId: job.eventId,
            eventType: event.eventType,
            consumer: job.consumer,
            outcome,
          });
        },
      },
    });
    runner = started;
    // A runner is judged from when it could first take a job: starting one (connecting, checking the queue's
    // schema, opening its pool) can take longer than a short stall period on a starved machine, and is
    // given STARTUP_ALLOWANCE_MS before its first sign.
    lastSign = Date.now();
    signedSinceStart = false;
    const ended = (reason: unknown) => {
      if (stopped || runner !== started) return;
      runner = undefined;
      const delayMs = Math.min(200 * 2 ** restarts++, 5_000);
      options.log.error({ err: reason, delayMs }, "the job runner stopped by itself; starting a new one");
      setTimeout(restart, delayMs).unref();
    };
    started.promise.then(
      () => ended(new Error("the worker pool exited")),
      (error: unknown) => ended(error),
    );
  };
  const restart = () => {
    if (stopped) return;
    startRunner().then(
      () => options.log.warn({ restarts }, "job runner running again"),
      (err: unknown) => {
        const delayMs = Math.min(200 * 2 ** restarts++, 5_000);
        options.log.error({ err, delayMs }, "could not start the job runner; trying again");
        setTimeout(restart, delayMs).unref();
      },
    );
  };
  await startRunner();
  /** Lets go of the runner now taking jobs (it stops in the background, if it ever does) and starts another. */
  const replaceRunner = () => {
    const stuck = runner;
    runner = undefined;
    if (currentPool) poolIds.delete(currentPool);
    // The stuck runner's polls are no longer watched; the next runner's count from its pool's creation.
    currentPool = undefined;
    running.clear();
    polls.clear();
    lastSign = Date.now();
    void stuck
      ?.stop()
      .catch((err: unknown) => options.log.debug({ err }, "stuck runner did not stop cleanly"));
    restart();
  };
  // A relay takes milliseconds; one stuck on a dead connection is given up on quickly.
  // The loops that run on the process's own database pool, and when each last finished a run.
  const finished = { "outbox relay": Date.now(), "worker heartbeat": Date.now() };
  const relay = every(
    options.relayIntervalMs,
    async () => {
      await relayOutbox(db);
      finished["outbox relay"] = Date.now();
    },
    {
      name: "outbox relay",
      log: options.log,
      deadlineMs: 10_000,
    },
  );
  const refunds = options.refunds;
  const submitter = refunds
    ? every(refunds.intervalMs, () => submitPendingRefunds(db, refunds), {
        name: "refund submitter",
        log: options.log,
      })
    : undefined;
  const background = (options.background ?? []).map((loop) =>
    every(loop.everyMs, () => measured(loop, options.observer), {
      name: loop.name,
      log: options.log,
      deadlineMs: loop.deadlineMs ?? 5 * 60_000,
      startNow: true,
    }),
  );
  const heartbeatMs = options.heartbeatMs ?? 2_000;
  const heartbeat = every(
    heartbeatMs,
    async () => {
      const deadAfterMs = heartbeatMs * MISSED_BEATS;
      const reclaimed = await beatAndReclaim(db, [...poolIds], deadAfterMs);
      if (reclaimed.length > 0) options.log.warn({ workers: reclaimed }, "unlocked the jobs of dead workers");
      const orphans = await unlockOrphans(db, [...poolIds], [...running.keys()], deadAfterMs);
      if (orphans.length > 0) options.log.warn({ jobs: orphans }, "unlocked our jobs whose outcome was lost");
      finished["worker heartbeat"] = Date.now();
    },
    // Well inside the time after which the others would take this worker for dead.
    { name: "worker heartbeat", log: options.log, deadlineMs: heartbeatMs * 2 },
  );
  let complainedAt = 0;
  const liveness = setInterval(
    () => {
      if (stopped) return;
      const now = Date.now();
      // The process's own pool: a loop that has not finished a run for that long is stuck on it, and a new
      // job runner would not help (its consumers use the same pool): only a fresh process will.
      const [loop, doneAt] = Object.entries(finished).sort(([, a], [, b]) => a - b)[0] ?? ["", now];
      if (now - doneAt > stallMs) {
        // Said once per stall period while it lasts (a worker without onGiveUp goes on and may come back).
        if (now - complainedAt < stallMs) return;
        complainedAt = now;
        const why = `the ${loop} has not finished a run for ${Math.round((now - doneAt) / 1000)} s`;
        options.log.fatal({ why }, "the event worker is stuck on its database connections");
        options.onGiveUp?.(why);
        return;
      }
      const oldestJob = Math.min(now, ...running.values());
      const allowance = signedSinceStart ? stallMs : Math.max(stallMs, STARTUP_ALLOWANCE_MS);
      const hungPoll = [...polls.values()].find((poll) => now - poll.since > poll.allowanceMs);
      const why =
        now - lastSign > allowance
          ? `no job finished and no poll answered for ${Math.round((now - lastSign) / 1000)} s`
          : now - oldestJob > stallMs
            ? `a job has run for ${Math.round((now - oldestJob) / 1000)} s`
            : hungPoll
              ? `a poll for jobs has waited ${Math.round((now - hungPoll.since) / 1000)} s`
              : undefined;
      // A runner still starting (after a replacement) has had no chance to take a job yet.
      if (!why || !runner) return;
      if (replacements >= MAX_REPLACEMENTS && options.onGiveUp) {
        options.log.fatal(
          { why, replacements },
          "the event worker is stuck, and new job runners did not help",
        );
        options.onGiveUp(why);
        return;
      }
      replacements++;
      options.log.error({ why, replacements }, "the event worker is stuck: replacing its job runner");
      replaceRunner();
    },
    Math.min(1_000, Math.max(50, stallMs / 4)),
  );
  liveness.unref();
  let stopping: Promise<void> | undefined;
  return {
    currentRunner: () => runner,
    stop() {
      stopping ??= (async () => {
        clearInterval(relay);
        clearInterval(heartbeat);
        clearInterval(liveness);
        if (submitter) clearInterval(submitter);
        for (const loop of background) clearInterval(loop);
        stopped = true;
        // Stops taking jobs and waits for the running ones (a second signal must not throw), for a bounded time.
        const runnerStopped = runner
          ?.stop()
          .catch((err: unknown) => options.log.debug({ err }, "worker already stopped"));
        let timer: NodeJS.Timeout | undefined;
        const outwaited = await Promise.race([
          runnerStopped?.then(() => false),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), options.stopTimeoutMs ?? 10_000);
          }),
        ]);
        clearTimeout(timer);
        if (outwaited)
          options.log.error(
            "the job runner did not stop in time (its connections hang?); stopping without it",
          );
        await db
          .execute(sql`DELETE FROM worker_heartbeat WHERE process = ${PROCESS}`)
          .catch((err: unknown) => options.log.debug({ err }, "could not remove heartbeats"));
      })();
      return stopping;
    },
  };
}
