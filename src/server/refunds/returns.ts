import { eq, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { outboxEvent, type RefundStatus, refundOrder, returnReceipt } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { refundLinesOf } from "./create-refund";
import { type RefundDeps, submitRefund } from "./submit";
import { lockPayment, moveRefund, restateRejectedRefunds } from "./transitions";

/**
 * Returns: lines of an order that has shipped are refunded only once the goods are back. A return
 * waits in REFUND_AWAITING_GOODS (its money owed, so no other refund takes its room) until a receipt:
 * an operator's "received" on /admin, or a carrier's scan, idempotent by its key. The receipt records
 * what came back, raises ReturnReceived (the stock-return consumer puts the goods back in stock) and
 * sends the refund to the provider. A return whose goods never come is cancelled: it refunds nothing.
 */

/** Where a return stands after a receipt or a cancel: its status now, and whether this call moved it. */
export interface ReturnAnswer {
  status: RefundStatus;
  moved: boolean;
}

async function findReturn(db: Db, providerRefundNo: string) {
  const [refund] = await db
    .select()
    .from(refundOrder)
    .where(eq(refundOrder.providerRefundNo, providerRefundNo));
  if (!refund) throw new DomainError("ORDER_NOT_FOUND", `no refund ${providerRefundNo}`);
  return refund;
}

/**
 * The goods of a return were received (`receiptKey`: the scan, or the operator's click): recorded once per
 * (return, SKU), then the money goes out. Any number of receipts of one return, at once, receive it once.
 */
export async function receiveReturn(
  db: Db,
  providerRefundNo: string,
  receiptKey: string,
  deps: RefundDeps,
): Promise<ReturnAnswer> {
  const refund = await findReturn(db, providerRefundNo);
  const moved = await db.transaction(async (tx) => {
    await lockPayment(tx, { userId: refund.userId, id: refund.paymentId });
    const received = await moveRefund(tx, refund, "receive");
    if (!received) return false;
    const lines = (await refundLinesOf(tx, refund.userId, [refund.id])).get(refund.id) ?? [];
    if (lines.length > 0) {
      await tx
        .insert(returnReceipt)
        .values(
          lines.map((line) => ({
            ...line,
            userId: refund.userId,
            refundId: refund.id,
            orderId: refund.orderId,
            receiptKey,
          })),
        )
        .onConflictDoNothing({ target: [returnReceipt.userId, returnReceipt.refundId, returnReceipt.skuId] });
    }
    await tx
      .insert(outboxEvent)
      .values({
        userId: refund.userId,
        eventType: "ReturnReceived",
        aggregateType: "order",
        aggregateId: refund.orderId,
        dedupeKey: `ReturnReceived:${refund.id}`,
        payload: { orderId: refund.orderId, refundId: refund.id, refundNo: refund.refundNo },
      })
      .onConflictDoNothing({ target: [outboxEvent.userId, outboxEvent.dedupeKey] });
    return true;
  });
  if (!moved) return { status: await statusOf(db, providerRefundNo), moved: false };
  // Sent now if the provider answers; else the background submitter sends it.
  const status = await submitRefund(db, providerRefundNo, deps).catch(() => "REFUND_CREATED" as const);
  return { status, moved: true };
}

/** The goods of a return never came: it is cancelled and refunds nothing; its room goes back to the order. */
export async function cancelReturn(db: Db, providerRefundNo: string): Promise<ReturnAnswer> {
  const refund = await findReturn(db, providerRefundNo);
  const moved = await db.transaction(async (tx) => {
    const payment = { userId: refund.userId, id: refund.paymentId };
    await lockPayment(tx, payment);
    const cancelled = await moveRefund(tx, refund, "cancelReturn", {
      failureReason: "the goods never came back",
    });
    // Room it held may fit a refund it superseded.
    if (cancelled) await restateRejectedRefunds(tx, payment, "other refunds returned what it would have");
    return cancelled !== undefined;
  });
  return { status: await statusOf(db, providerRefundNo), moved };
}

async function statusOf(db: Db, providerRefundNo: string): Promise<RefundStatus> {
  const [row] = await db
    .select({ status: refundOrder.status })
    .from(refundOrder)
    .where(sql`${refundOrder.providerRefundNo} = ${providerRefundNo}`);
  return row?.status ?? "REFUND_CREATED";
}
