import { randomUUID } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Db } from "~/server/db/client";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { runOperation } from "~/server/operations";
import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { createOrderOperation } from "~/server/orders/create-order";
import { closeTimedOutOrders } from "~/server/orders/timeout";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { applyFactFromProvider, syncPaymentStatus } from "~/server/payments/status-query";
import { repairWhatIsSafe } from "~/server/reconciliation/repair";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { receiveReturn } from "~/server/refunds/returns";
import { submitRefund } from "~/server/refunds/submit";
import type { ActorAnswer } from "./explore";
import {
  completeRefunds,
  consume,
  delivery,
  eventOf,
  type OpenedPayment,
  openPayment,
  type PlacedOrder,
  paidOrder,
  paymentFact,
  placeOrder,
  refundOf,
  TWO_MUGS,
  tell,
  type World,
} from "./world";

/**
 * The pairs of actors that touch one order at the same moment, each a story set up before every schedule
 * and two (or three) of the app's real actions run against it, statement by statement through the gates.
 * After each schedule the order is settled (./world.ts) and checked: reconciliation's invariants, with no
 * lag, and what the pair says its answers must be (one answer per key).
 */
export interface Pair<F = unknown> {
  name: string;
  /** The actors it puts against each other, by kind (ACTOR_KINDS): the coverage test reads them. */
  covers: ActorKind[];
  /** Preemptions per schedule (explore.ts); the default is the run's. */
  bound?: number;
  setup: (world: World) => Promise<F>;
  actors: Actor<F>[];
  /** What happens next to the story, after the actors and before it is settled (the order ships, say). */
  afterwards?: (world: World, fixture: F) => Promise<unknown>;
  /** The orders whose invariants are checked after the schedule. */
  orders: (fixture: F, answers: ActorAnswer[]) => string[];
  /** What the answers must be, whatever the schedule. */
  check?: (world: World, fixture: F, answers: ActorAnswer[]) => Promise<string[]>;
}

export interface Actor<F> {
  name: string;
  /** Connections its pool opens (an action that holds one while it asks on another needs two). */
  connections?: number;
  act: (world: World, db: Db, fixture: F) => Promise<unknown>;
}

/**
 * Everything that can act on an order: the operations (src/server/all-operations.ts), the consumers
 * (src/server/fulfilment/consumers.ts), the provider's facts, the jobs and the operator's buttons.
 * test/interleavings.test.ts holds this list to the app's operations and consumers.
 */
export const ACTOR_KINDS = [
  "order.create",
  "order.cancel",
  "payment.create",
  "refund.create",
  "consumer:stock",
  "consumer:benefits",
  "consumer:shipping",
  "consumer:stock-return",
  "consumer:benefit-reversal",
  "consumer:auto-refund",
  "provider:payment.succeeded",
  "provider:payment.closed",
  "job:payment-timeout",
  "job:status-query",
  "job:repair",
  "job:refund-submitter",
  "operator:retry-refund",
  "operator:return-received",
] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

const pair = <F>(p: Pair<F>): Pair<F> => p;

/**
 * The pairs where a refund is recorded run two actors of 25 to 35 statements each: every schedule with two
 * preemptions is about 500 of them a pair (four minutes for the five), with one about 40. They are explored
 * with one; every other pair with the run's default, two.
 */
const REFUND_BOUND = 1;

/** A pair, whatever its story's shape (each pair's own functions agree on it). */
// biome-ignore lint/suspicious/noExplicitAny: the pairs' stories differ; each pair is typed where it is written
export type AnyPair = Pair<any>;

/* ---------------------------------------------------------------- the actions, as the app runs them */

const cancel = (world: World, db: Db, order: PlacedOrder) =>
  runOperation(
    db,
    cancelOrderOperation,
    { userId: order.userId, input: { orderId: order.orderId }, deps: { payments: world.deps } },
    world.idempotency,
  );

const openAnotherPayment = (world: World, db: Db, order: PlacedOrder) =>
  runOperation(
    db,
    createPaymentOperation,
    { userId: order.userId, input: { orderId: order.orderId }, deps: { payments: world.deps } },
    world.idempotency,
  );

const succeed = (world: World, db: Db, payment: OpenedPayment, transactionId: string) =>
  tell(world, db, paymentFact(payment, "payment.succeeded", transactionId));

const refund = (
  world: World,
  db: Db,
  order: PlacedOrder,
  input: { refundNo: string; amountCents?: number; lines?: { skuId: string; quantity: number }[] },
) =>
  runOperation(
    db,
    createRefundOperation,
    { userId: order.userId, input: { orderId: order.orderId, ...input }, deps: { payments: world.deps } },
    world.idempotency,
  );

const consumeOne = (db: Db, event: { eventId: string; userId: string }, consumer: string) =>
  handleConsumeJob(db, { ...event, consumer });

/** The notify handler of another app instance: the module loaded again, with in-process state of its own. */
let otherInstance: Promise<typeof import("~/server/payments/notification-receive")> | undefined;
const notifyOnAnotherInstance = () => {
  otherInstance ??= import(
    `${pathToFileURL(path.resolve("src/server/payments/notification-receive.ts")).href}?instance=2`
  ) as Promise<typeof import("~/server/payments/notification-receive")>;
  return otherInstance;
};

/** A placed order whose payment was closed here by a crossed payment.closed, while the provider took the money. */
async function crossedClose(world: World) {
  const order = await placeOrder(world);
  const payment = await openPayment(world, order);
  const transactionId = `T${randomUUID().slice(0, 12)}`;
  world.script.paid.set(payment.outTradeNo, transactionId);
  await tell(world, world.db, paymentFact(payment, "payment.closed", null));
  return { order, payment, transactionId };
}

/** A placed order with its payment open; paid at the provider when `paid`. */
async function awaitingPayment(world: World, { paid }: { paid: boolean }) {
  const order = await placeOrder(world);
  const payment = await openPayment(world, order);
  const transactionId = `T${randomUUID().slice(0, 12)}`;
  if (paid) world.script.paid.set(payment.outTradeNo, transactionId);
  return { order, payment, transactionId };
}

const answerError = (answer: ActorAnswer | undefined) =>
  (answer?.value as { code?: string } | undefined)?.code ?? String(answer?.value);

/* ---------------------------------------------------------------- the pairs */

export const PAIRS: AnyPair[] = [
  pair({
    name: "order.create × order.create (one request id)",
    covers: ["order.create"],
    setup: async () => ({ userId: randomUUID(), requestId: randomUUID() }),
    actors: ["first", "copy"].map((name) => ({
      name: `order.create (${name})`,
      act: (world: World, db: Db, f: { userId: string; requestId: string }) =>
        runOperation(
          db,
          createOrderOperation,
          { userId: f.userId, input: { requestId: f.requestId, items: TWO_MUGS }, deps: {} },
          world.idempotency,
        ),
    })),
    orders: (_f, answers) => answers.flatMap((a) => (a.ok ? [(a.value as { orderId: string }).orderId] : [])),
    check: async (world, f, answers) => {
      const problems = answers.filter((a) => !a.ok).map((a) => `${a.name} failed: ${answerError(a)}`);
      const ids = new Set(answers.map((a) => (a.value as { orderId?: string })?.orderId));
      if (ids.size !== 1) problems.push(`two answers for one key: ${[...ids].join(", ")}`);
      const [row] = await world.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM orders WHERE user_id = ${f.userId} AND request_id = ${f.requestId}`;
      if (row?.n !== 1) problems.push(`${row?.n} orders for one request id`);
      return problems;
    },
  }),

  pair({
    name: "payment.create × payment.create (one order)",
    covers: ["payment.create"],
    setup: (world) => placeOrder(world),
    actors: ["first", "copy"].map((name) => ({
      name: `payment.create (${name})`,
      act: (world: World, db: Db, order: PlacedOrder) => openAnotherPayment(world, db, order),
    })),
    orders: (order) => [order.orderId],
    check: async (_world, _order, answers) => {
      const trades = new Set(answers.map((a) => (a.value as { outTradeNo?: string })?.outTradeNo));
      return trades.size === 1 && answers.every((a) => a.ok)
        ? []
        : [`answers differ: ${[...trades].join(", ")}`];
    },
  }),

  pair({
    name: "payment.succeeded × payment.create (a second payment, the first closed here by a crossed close)",
    covers: ["provider:payment.succeeded", "payment.create"],
    setup: crossedClose,
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      { name: "payment.create", act: (world, db, f) => openAnotherPayment(world, db, f.order) },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "payment.succeeded × order.cancel (payment closed here by a crossed close)",
    covers: ["provider:payment.succeeded", "order.cancel"],
    setup: crossedClose,
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      { name: "order.cancel", act: (world, db, f) => cancel(world, db, f.order) },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "payment.succeeded × order.cancel (payment open; the provider's close answers PAID)",
    covers: ["provider:payment.succeeded", "order.cancel"],
    setup: (world) => awaitingPayment(world, { paid: true }),
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      { name: "order.cancel", act: (world, db, f) => cancel(world, db, f.order) },
    ],
    orders: (f) => [f.order.orderId],
    check: async (_world, _f, [, cancelled]) =>
      cancelled?.ok || answerError(cancelled) === "ORDER_NOT_CANCELLABLE"
        ? []
        : [`the cancel answered ${answerError(cancelled)}`],
  }),

  pair({
    name: "payment.succeeded × payment timeout (payment closed here by a crossed close)",
    covers: ["provider:payment.succeeded", "job:payment-timeout"],
    setup: async (world) => {
      const story = await crossedClose(world);
      // Due now, and the oldest due of all (the job takes the oldest first, one here): placed longer ago
      // than the timeout, and before the stories of the schedules before it.
      await world.sql`
        UPDATE orders SET created_at = (SELECT least(min(created_at), now() - interval '2 hours') FROM orders) - interval '1 second'
         WHERE id = ${story.order.orderId}`;
      return story;
    },
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      {
        name: "payment timeout",
        act: (world, db) =>
          closeTimedOutOrders(db, { payments: { ...world.deps, paymentTimeoutS: 3600 } }, 1),
      },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "payment.succeeded × the close's answer (CLOSED)",
    covers: ["provider:payment.succeeded", "provider:payment.closed"],
    setup: (world) => awaitingPayment(world, { paid: true }),
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      {
        name: "close answer",
        act: (world, db, f) =>
          applyFactFromProvider(
            db,
            "close",
            paymentFact(f.payment, "payment.closed", null),
            world.deps.refunds,
          ),
      },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "payment.succeeded × status query (PAID)",
    covers: ["provider:payment.succeeded", "job:status-query"],
    setup: (world) => awaitingPayment(world, { paid: true }),
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      {
        name: "status query",
        act: (world, db, f) => syncPaymentStatus(db, f.payment.outTradeNo, world.deps),
      },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "payment.succeeded × payment.succeeded (two app instances)",
    covers: ["provider:payment.succeeded"],
    setup: (world) => awaitingPayment(world, { paid: true }),
    actors: [
      { name: "payment.succeeded", act: (world, db, f) => succeed(world, db, f.payment, f.transactionId) },
      {
        name: "payment.succeeded (other instance)",
        act: async (world, db, f) =>
          (await notifyOnAnotherInstance()).handlePaymentNotification(
            db,
            delivery(paymentFact(f.payment, "payment.succeeded", f.transactionId)),
            world.deps,
          ),
      },
    ],
    orders: (f) => [f.order.orderId],
    check: async (_world, _f, answers) =>
      answers
        .filter((a) => !a.ok || (a.value as { httpStatus: number }).httpStatus !== 200)
        .map((a) => `${a.name} answered ${a.ok ? JSON.stringify(a.value) : answerError(a)}`),
  }),

  pair({
    name: "refund.create × refund.create (two refunds, more than was paid together)",
    bound: REFUND_BOUND,
    covers: ["refund.create"],
    setup: (world) => paidOrder(world),
    actors: ["first", "second"].map((name) => ({
      name: `refund.create (${name})`,
      act: (world: World, db: Db, order: PlacedOrder) =>
        refund(world, db, order, {
          refundNo: `R-${name}-${randomUUID()}`,
          amountCents: Math.ceil(order.amountCents * 0.6),
        }),
    })),
    orders: (order) => [order.orderId],
    check: async (_world, _order, answers) => {
      const refused = answers.filter((a) => !a.ok).map(answerError);
      return refused.length === 1 && refused[0] === "REFUND_EXCEEDS_PAID"
        ? []
        : [`expected one REFUND_EXCEEDS_PAID, got ${JSON.stringify(refused)}`];
    },
  }),

  pair({
    name: "refund.create (a line) × shipping consumer",
    bound: REFUND_BOUND,
    covers: ["refund.create", "consumer:shipping"],
    setup: async (world) => {
      const order = await paidOrder(world);
      return { order, stockDeducted: await deductedNotShipped(world, order) };
    },
    actors: [
      {
        name: "refund.create (1 mug)",
        act: (world, db, f) =>
          refund(world, db, f.order, {
            refundNo: `R-${randomUUID()}`,
            lines: [{ skuId: "SKU-MUG", quantity: 1 }],
          }),
      },
      { name: "shipping consumer", act: (_world, db, f) => consumeOne(db, f.stockDeducted, "shipping") },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "refund send × refund send (the provider rejects the first it hears; the order ships after)",
    covers: ["job:refund-submitter"],
    setup: async (world) => {
      const order = await paidOrder(world);
      // The request's own send and the background submitter's both find it to send.
      const refundNo = await lineRefundToSend(world, order);
      const stockDeducted = await deductedNotShipped(world, order);
      world.script.rejectNext = 1;
      return { order, refund: (await refundOf(world, refundNo)).provider_refund_no, stockDeducted };
    },
    actors: [
      { name: "send (the request's)", act: (world, db, f) => submitRefund(db, f.refund, world.deps) },
      { name: "send (the submitter's)", act: (world, db, f) => submitRefund(db, f.refund, world.deps) },
    ],
    afterwards: (world, f) => consumeOne(world.db, f.stockDeducted, "shipping"),
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "refund.create × Retry (of a rejected refund that fits only alone)",
    bound: REFUND_BOUND,
    covers: ["refund.create", "operator:retry-refund"],
    setup: async (world) => {
      const order = await paidOrder(world);
      const refundNo = `R-${randomUUID()}`;
      const half = Math.ceil(order.amountCents * 0.6);
      await rejectedRefund(world, order, { refundNo, amountCents: half });
      return { order, rejected: (await refundOf(world, refundNo)).provider_refund_no, half };
    },
    actors: [
      {
        name: "refund.create",
        act: (world, db, f) =>
          refund(world, db, f.order, { refundNo: `R-${randomUUID()}`, amountCents: f.half }),
      },
      { name: "Retry", act: (world, db, f) => retryFailedRefund(db, f.rejected, world.deps) },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "Retry (of a rejected line refund) × shipping consumer",
    bound: REFUND_BOUND,
    covers: ["operator:retry-refund", "consumer:shipping"],
    setup: async (world) => {
      const order = await paidOrder(world);
      const refundNo = `R-${randomUUID()}`;
      await rejectedRefund(world, order, { refundNo, lines: [{ skuId: "SKU-MUG", quantity: 1 }] });
      const stockDeducted = await deductedNotShipped(world, order);
      return { order, rejected: (await refundOf(world, refundNo)).provider_refund_no, stockDeducted };
    },
    actors: [
      { name: "Retry", act: (world, db, f) => retryFailedRefund(db, f.rejected, world.deps) },
      { name: "shipping consumer", act: (_world, db, f) => consumeOne(db, f.stockDeducted, "shipping") },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "return received × refund.create (the rest)",
    bound: REFUND_BOUND,
    covers: ["operator:return-received", "refund.create"],
    setup: async (world) => {
      const order = await paidOrder(world);
      await consume(world, order.orderId);
      const refundNo = `R-${randomUUID()}`;
      const kettle = await refund(world, world.db, order, {
        refundNo,
        lines: [{ skuId: "SKU-MUG", quantity: 1 }],
      });
      const awaiting = await refundOf(world, refundNo);
      if (awaiting.status !== "REFUND_AWAITING_GOODS") throw new Error(`the return is ${awaiting.status}`);
      return { order, returned: awaiting.provider_refund_no, rest: order.amountCents - kettle.amountCents };
    },
    actors: [
      {
        name: "return received",
        act: (world, db, f) => receiveReturn(db, f.returned, `scan-${randomUUID()}`, world.deps),
      },
      {
        name: "refund.create (the rest)",
        act: (world, db, f) =>
          refund(world, db, f.order, { refundNo: `R-${randomUUID()}`, amountCents: f.rest }),
      },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "order.create spending a coupon × order.cancel of the order holding it",
    covers: ["order.create", "order.cancel"],
    setup: async (world) => {
      const earner = await paidOrder(world);
      await consume(world, earner.orderId);
      const [grant] = await world.sql<{ code: string }[]>`
        SELECT code FROM benefit_grant WHERE order_id = ${earner.orderId} AND benefit_type = 'COUPON'`;
      if (!grant) throw new Error("no coupon granted");
      const holder = await runOperation(
        world.db,
        createOrderOperation,
        {
          userId: earner.userId,
          input: { requestId: randomUUID(), items: TWO_MUGS, couponCode: grant.code },
          deps: {},
        },
        world.idempotency,
      );
      return { earner, code: grant.code, holder: { ...earner, orderId: holder.orderId } };
    },
    actors: [
      {
        name: "order.create (the coupon)",
        act: (world, db, f) =>
          runOperation(
            db,
            createOrderOperation,
            {
              userId: f.earner.userId,
              input: { requestId: randomUUID(), items: TWO_MUGS, couponCode: f.code },
              deps: {},
            },
            world.idempotency,
          ),
      },
      { name: "order.cancel (the holder)", act: (world, db, f) => cancel(world, db, f.holder) },
    ],
    orders: (f, [created]) => [
      f.holder.orderId,
      ...(created?.ok ? [(created.value as { orderId: string }).orderId] : []),
    ],
    check: async (_world, _f, [created, cancelled]) => [
      ...(cancelled?.ok ? [] : [`the cancel failed: ${answerError(cancelled)}`]),
      ...(created?.ok || answerError(created) === "COUPON_ALREADY_USED"
        ? []
        : [`the new order answered ${answerError(created)}`]),
    ],
  }),

  pair({
    name: "repair × auto-refund consumer (an order short of stock, holding its money)",
    // The repair's scan reads every payment's ledger: with two preemptions, 140 schedules and 18 s.
    bound: REFUND_BOUND,
    covers: ["job:repair", "consumer:auto-refund"],
    setup: async (world) => {
      const short = await shortOrder(world);
      return { orderId: short.orderId, event: await eventOf(world, short.orderId, "StockShort") };
    },
    actors: [
      { name: "repair", act: (_world, db) => repairWhatIsSafe(db, { lagSeconds: 0 }) },
      { name: "auto-refund consumer", act: (_world, db, f) => consumeOne(db, f.event, "auto-refund") },
    ],
    orders: (f) => [f.orderId],
  }),

  pair({
    name: "repair × Retry (of a line refund rejected after the shipment left its unit behind)",
    covers: ["job:repair", "operator:retry-refund"],
    bound: REFUND_BOUND,
    setup: async (world) => {
      const order = await paidOrder(world);
      // Under way when the order ships, so its unit stays behind.
      const refundNo = await lineRefundToSend(world, order);
      await consume(world, order.orderId);
      world.script.rejectNext = 1;
      await submitRefund(world.db, (await refundOf(world, refundNo)).provider_refund_no, world.deps);
      const rejected = await refundOf(world, refundNo);
      if (rejected.status !== "REFUND_FAILED") throw new Error(`the refund is ${rejected.status}`);
      return { order, rejected: rejected.provider_refund_no };
    },
    actors: [
      { name: "repair", act: (_world, db) => repairWhatIsSafe(db, { lagSeconds: 0 }) },
      { name: "Retry", act: (world, db, f) => retryFailedRefund(db, f.rejected, world.deps) },
    ],
    orders: (f) => [f.order.orderId],
  }),

  pair({
    name: "repair × stock-return consumer (a return received and refunded, its goods not yet back in stock)",
    covers: ["job:repair", "consumer:stock-return"],
    setup: async (world) => {
      const order = await paidOrder(world);
      await consume(world, order.orderId);
      const refundNo = `R-${randomUUID()}`;
      await refund(world, world.db, order, { refundNo, lines: [{ skuId: "SKU-MUG", quantity: 1 }] });
      const returned = await refundOf(world, refundNo);
      await receiveReturn(world.db, returned.provider_refund_no, `scan-${randomUUID()}`, world.deps);
      await completeRefunds(world, order.orderId);
      return { orderId: order.orderId, event: await eventOf(world, order.orderId, "ReturnReceived") };
    },
    actors: [
      { name: "repair", act: (_world, db) => repairWhatIsSafe(db, { lagSeconds: 0 }) },
      { name: "stock-return consumer", act: (_world, db, f) => consumeOne(db, f.event, "stock-return") },
    ],
    orders: (f) => [f.orderId],
  }),

  ...redeliveries(),
];

/** Two paid orders of the last units: the one consumed second runs short of stock (its StockShort raised). */
async function shortOrder(world: World) {
  // Earlier stories of the batch may have taken them all: then a delivery comes in, so there is one to take.
  await world.sql`
    UPDATE sku SET stock = stock + 1, initial_stock = initial_stock + 1 WHERE id = 'SKU-LIMITED' AND stock = 0`;
  const [limited] = await world.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = 'SKU-LIMITED'`;
  const first = await paidOrder(world, [{ skuId: "SKU-LIMITED", quantity: limited?.stock ?? 1 }]);
  const second = await paidOrder(world, [{ skuId: "SKU-LIMITED", quantity: 1 }]);
  await consume(world, first.orderId, "OrderPaid", ["stock"]);
  await consume(world, second.orderId, "OrderPaid", ["stock"]);
  return second;
}

/** A refund the provider rejected (afterCommit sends it at once; the script rejects that send). */
/** A line refund of one mug recorded while the provider is away: REFUND_CREATED, for a send to take. */
async function lineRefundToSend(world: World, order: PlacedOrder): Promise<string> {
  const refundNo = `R-${randomUUID()}`;
  world.script.away = true;
  await refund(world, world.db, order, { refundNo, lines: [{ skuId: "SKU-MUG", quantity: 1 }] });
  world.script.away = false;
  return refundNo;
}

/** The order's stock deducted and not shipped: its StockDeducted, for the shipping consumer to take. */
async function deductedNotShipped(world: World, order: PlacedOrder) {
  await consume(world, order.orderId, "OrderPaid", ["stock"]);
  return eventOf(world, order.orderId, "StockDeducted");
}

async function rejectedRefund(
  world: World,
  order: PlacedOrder,
  input: { refundNo: string; amountCents?: number; lines?: { skuId: string; quantity: number }[] },
) {
  world.script.rejectNext = 1;
  await refund(world, world.db, order, input);
  const rejected = await refundOf(world, input.refundNo);
  if (rejected.status !== "REFUND_FAILED") throw new Error(`the refund is ${rejected.status}, not rejected`);
}

/** Each consumer, its event delivered twice at once (a redelivery racing the first delivery). */
function redeliveries(): AnyPair[] {
  const twice = (
    consumer: string,
    kind: ActorKind,
    setup: (world: World) => Promise<{ orderId: string; event: { eventId: string; userId: string } }>,
  ) =>
    pair({
      name: `${consumer} consumer × its redelivery`,
      covers: [kind],
      setup,
      actors: ["delivery", "redelivery"].map((name) => ({
        name: `${consumer} (${name})`,
        act: (_world: World, db: Db, f: { event: { eventId: string; userId: string } }) =>
          consumeOne(db, f.event, consumer),
      })),
      orders: (f) => [f.orderId],
    });
  const paid = async (world: World) => {
    const order = await paidOrder(world);
    return { orderId: order.orderId, event: await eventOf(world, order.orderId, "OrderPaid") };
  };
  /** A line refund of an unshipped order (its stock deducted, its benefits granted) that succeeded. */
  const refunded = async (world: World) => {
    const order = await paidOrder(world);
    await consume(world, order.orderId, "OrderPaid", ["stock", "benefits"]);
    await refund(world, world.db, order, {
      refundNo: `R-${randomUUID()}`,
      lines: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    await completeRefunds(world, order.orderId);
    return { orderId: order.orderId, event: await eventOf(world, order.orderId, "RefundSucceeded") };
  };
  return [
    twice("stock", "consumer:stock", paid),
    twice("benefits", "consumer:benefits", paid),
    twice("shipping", "consumer:shipping", async (world) => {
      const order = await paidOrder(world);
      return { orderId: order.orderId, event: await deductedNotShipped(world, order) };
    }),
    twice("stock-return", "consumer:stock-return", refunded),
    twice("benefit-reversal", "consumer:benefit-reversal", refunded),
    twice("auto-refund", "consumer:auto-refund", async (world) => {
      const short = await shortOrder(world);
      return { orderId: short.orderId, event: await eventOf(world, short.orderId, "StockShort") };
    }),
  ];
}
