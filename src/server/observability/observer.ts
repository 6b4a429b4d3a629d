import type { IdempotencyEvent } from "@exactly-once/idempotency";
import type { Logger } from "pino";
import { Counter, Registry } from "prom-client";
import type { AttemptLog } from "./attempt-log";

export type { IdempotencyEvent, IdempotencyOutcome } from "@exactly-once/idempotency";

export interface NotificationEvent {
  outcome: string;
  type: string | null;
  notificationId: string | null;
  deliveryId: string | null;
  outTradeNo: string | null;
  alert: boolean;
}

export interface ConsumeEvent {
  /** The event's shopper. */
  userId: string;
  eventId: string;
  eventType: string;
  consumer: string;
  outcome: string;
}

/**
 * One place that turns facts into logs, Prometheus counters and the per-minute
 * series the operations page charts. Services receive it as a dependency; tests
 * can pass their own.
 */
export interface Observer {
  /** One call's outcome under its key; `requestId`, when given, names the request it served in the log line. */
  idempotency(event: IdempotencyEvent, requestId?: string): void;
  notification(event: NotificationEvent): void;
  consumed(event: ConsumeEvent): void;
  gatewayRejected(event: GatewayRejection): void;
  /** One run of a worker's periodic task (src/server/fulfilment/worker.ts). */
  backgroundTask?(event: BackgroundTaskRun): void;
}

export interface BackgroundTaskRun {
  task: string;
  ms: number;
  /** The process's CPU while the task ran (its own, and whatever ran beside it: an upper bound). */
  cpuMs: number;
  ok: boolean;
}

export interface GatewayRejection {
  route: string;
  /** The shopper and the request's key, when the route has one. */
  scope?: string;
  key?: string;
  /** Which limit turned it away, in words (the story shows it). */
  by?: string;
}

/** What a consumer's outcome other than APPLIED means: what absorbed the delivery. */
export const CONSUMER_ABSORBERS: Record<string, string> = {
  DUPLICATE: "the consume record (one per event and consumer: the event was applied before)",
  SKIPPED: "the consumer's guard on the order's state (nothing left to do)",
};

export const NOOP_OBSERVER: Observer = {
  idempotency: () => {},
  notification: () => {},
  consumed: () => {},
  gatewayRejected: () => {},
};

/** Per-minute counts kept in this process for the operations page's charts (last hour). */
export class MinuteSeries {
  private readonly buckets = new Map<number, Map<string, number>>();

  add(name: string, at = Date.now()): void {
    const minute = Math.floor(at / 60_000);
    let bucket = this.buckets.get(minute);
    if (!bucket) {
      bucket = new Map();
      this.buckets.set(minute, bucket);
      for (const old of this.buckets.keys()) if (old < minute - 60) this.buckets.delete(old);
    }
    bucket.set(name, (bucket.get(name) ?? 0) + 1);
  }

  /** The last `minutes` minutes of one series, oldest first (zeros included). */
  last(name: string, minutes = 15, now = Date.now()): { minute: Date; count: number }[] {
    const current = Math.floor(now / 60_000);
    return Array.from({ length: minutes }, (_, i) => {
      const minute = current - minutes + 1 + i;
      return { minute: new Date(minute * 60_000), count: this.buckets.get(minute)?.get(name) ?? 0 };
    });
  }
}

export interface Telemetry {
  observer: Observer;
  /** Attempts per key as data (the order's story); absent where nothing should be written. */
  attempts?: AttemptLog;
  registry: Registry;
  series: MinuteSeries;
}

/** The running app's observer: structured logs, Prometheus counters, chart series. */
export function createTelemetry(log: Logger, attempts?: AttemptLog): Telemetry {
  const registry = new Registry();
  const idempotent = new Counter({
    name: "checkout_idempotent_requests_total",
    help: "Idempotent calls by operation and outcome (first, replayed, conflict, mismatch, …)",
    labelNames: ["biz_type", "outcome"],
    registers: [registry],
  });
  const notifications = new Counter({
    name: "checkout_payment_notifications_total",
    help: "Provider notifications received, by outcome (PROCESSED, DUPLICATE = absorbed, BAD_SIGNATURE, …)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const consumed = new Counter({
    name: "checkout_events_consumed_total",
    help: "Event deliveries to consumers, by consumer and outcome (DUPLICATE = skipped)",
    labelNames: ["consumer", "outcome"],
    registers: [registry],
  });
  const rejected = new Counter({
    name: "checkout_gateway_rejections_total",
    help: "Requests the gateway answered with 429, by operation",
    labelNames: ["route"],
    registers: [registry],
  });
  const taskRuns = new Counter({
    name: "checkout_background_task_runs_total",
    help: "Runs of a worker's periodic tasks, by task and whether the run finished without an error",
    labelNames: ["task", "ok"],
    registers: [registry],
  });
  const taskSeconds = new Counter({
    name: "checkout_background_task_seconds_total",
    help: "Time a worker's periodic tasks took, by task",
    labelNames: ["task"],
    registers: [registry],
  });
  const taskCpuSeconds = new Counter({
    name: "checkout_background_task_cpu_seconds_total",
    help: "The process's CPU while a periodic task ran, by task (an upper bound: what ran beside it counts too)",
    labelNames: ["task"],
    registers: [registry],
  });
  const series = new MinuteSeries();

  const observer: Observer = {
    backgroundTask({ task, ms, cpuMs, ok }) {
      taskRuns.inc({ task, ok: String(ok) });
      taskSeconds.inc({ task }, ms / 1000);
      taskCpuSeconds.inc({ task }, cpuMs / 1000);
      log.debug({ task, ms, cpuMs, ok }, "periodic task ran");
    },
    idempotency(event, requestId) {
      idempotent.inc({ biz_type: event.bizType, outcome: event.outcome });
      series.add(`idempotency:${event.outcome}`);
      attempts?.add({
        layer: "service",
        scope: event.scope,
        subject: event.bizType,
        key: event.key,
        outcome: event.outcome,
        absorbedBy: event.absorbedBy ?? "",
      });
      const level = event.outcome === "mismatch" || event.outcome === "unavailable" ? "warn" : "info";
      // Every request passes here: its line is made only when it will be written.
      if (!log.isLevelEnabled(level)) return;
      log[level](
        {
          requestId,
          bizType: event.bizType,
          idempotencyKey: event.key,
          outcome: event.outcome,
          durationMs: event.durationMs,
        },
        "idempotent call",
      );
    },
    notification(event) {
      notifications.inc({ outcome: event.outcome });
      series.add(`notification:${event.outcome}`);
      const level = event.alert
        ? "error"
        : event.outcome === "PROCESSED" || event.outcome === "DUPLICATE"
          ? "info"
          : "warn";
      log[level](event, event.alert ? "payment notification needs a person" : "payment notification");
    },
    consumed(event) {
      consumed.inc({ consumer: event.consumer, outcome: event.outcome });
      series.add(`consume:${event.outcome}`);
      attempts?.add({
        layer: "consumer",
        scope: event.userId,
        subject: event.consumer,
        key: event.eventId,
        outcome: event.outcome,
        absorbedBy: CONSUMER_ABSORBERS[event.outcome] ?? "",
      });
      log.info({ ...event }, "event consumed");
    },
    gatewayRejected(event) {
      rejected.inc({ route: event.route });
      series.add("gateway:rejected");
      if (event.key) {
        attempts?.add({
          layer: "gateway",
          scope: event.scope ?? "",
          subject: event.route,
          key: event.key,
          outcome: "rejected",
          absorbedBy: event.by ?? "the gateway (429)",
        });
      }
    },
  };
  return { observer, registry, series, ...(attempts ? { attempts } : {}) };
}
