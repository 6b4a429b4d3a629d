import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Db } from "~/server/db/client";
import { closeDb } from "~/server/db/client";
import { SHIPPING_STEPS } from "~/server/fulfilment/consumers";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { runOperation } from "~/server/operations";
import { CANCEL_STEPS, cancelOrderOperation } from "~/server/orders/cancel-order";
import { APPLY_SUCCESS_STEPS } from "~/server/payments/notification-apply";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import type { TransactionSteps } from "~/shared/transaction-steps";
import type { Gate } from "../scripts/lib/interleavings/gate";
import {
  actorPool,
  closeWorld,
  consume,
  createWorld,
  delivery,
  eventOf,
  openPayment,
  paidOrder,
  paymentFact,
  placeOrder,
  tell,
  type World,
} from "../scripts/lib/interleavings/world";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The transactions the SPIN model (model/checkout.pml) takes in steps, declared beside their code
 * (src/shared/transaction-steps.ts), held to what runs: each is run once through the permutation harness's
 * gate, which counts its statements between BEGIN and COMMIT, and to the model's `step <transaction>/<name>`
 * marks. A statement added, removed or moved fails here until the declaration (and the model) follow.
 */
let t: TestDatabase;
let world: World;
let actor: { gate: Gate; db: Db };

beforeAll(async () => {
  t = await createTestDatabase();
  world = createWorld(t.url);
  actor = await actorPool(world, 2);
});
afterAll(async () => {
  await closeDb(actor.db);
  await actor.gate.close();
  await closeWorld(world);
  await t.drop();
});

/** The statements the action sent inside its (last) transaction, BEGIN and COMMIT left out. */
async function statementsOf(action: () => Promise<unknown>): Promise<string[]> {
  actor.gate.passed.length = 0;
  await action();
  const texts = actor.gate.passed.map((step) => step.text.trim());
  const begin = texts.map((text) => text.toLowerCase()).lastIndexOf("begin");
  const commit = texts.map((text) => text.toLowerCase()).lastIndexOf("commit");
  expect(begin).toBeGreaterThanOrEqual(0);
  expect(commit).toBeGreaterThan(begin);
  return texts.slice(begin + 1, commit);
}

function holdsTo(declared: TransactionSteps, statements: string[]) {
  expect(
    statements.map((text, i) => [i, declared.statements[i]?.matches.test(text) ? "matches" : text]),
  ).toEqual(declared.statements.map((_, i) => [i, "matches"]));
  const model = readFileSync("model/checkout.pml", "utf8");
  const marked = new Set(
    [...model.matchAll(new RegExp(`step ${declared.transaction.replace(".", "\\.")}/(\\w+)`, "g"))].map(
      (m) => m[1],
    ),
  );
  const steps = new Set(declared.statements.flatMap((s) => (s.step ? [s.step] : [])));
  expect([...marked].sort()).toEqual([...steps].sort());
}

describe("the transactions the model takes in steps", () => {
  it(`${APPLY_SUCCESS_STEPS.transaction}: ${APPLY_SUCCESS_STEPS.path}`, async () => {
    const order = await placeOrder(world);
    const payment = await openPayment(world, order);
    const fact = paymentFact(payment, "payment.succeeded", `T${randomUUID().slice(0, 12)}`);
    const statements = await statementsOf(() =>
      handlePaymentNotification(actor.db, delivery(fact), world.deps),
    );
    holdsTo(APPLY_SUCCESS_STEPS, statements);
  });

  it(`${CANCEL_STEPS.transaction}: ${CANCEL_STEPS.path}`, async () => {
    const order = await placeOrder(world);
    const payment = await openPayment(world, order);
    await tell(world, world.db, paymentFact(payment, "payment.closed", null));
    const statements = await statementsOf(() =>
      runOperation(
        actor.db,
        cancelOrderOperation,
        { userId: order.userId, input: { orderId: order.orderId }, deps: { payments: world.deps } },
        world.idempotency,
      ),
    );
    holdsTo(CANCEL_STEPS, statements);
  });

  it(`${SHIPPING_STEPS.transaction}: ${SHIPPING_STEPS.path}`, async () => {
    const order = await paidOrder(world);
    await consume(world, order.orderId, "OrderPaid", ["stock"]);
    const event = await eventOf(world, order.orderId, "StockDeducted");
    const statements = await statementsOf(() =>
      handleConsumeJob(actor.db, { ...event, consumer: "shipping" }),
    );
    holdsTo(SHIPPING_STEPS, statements);
  });
});
