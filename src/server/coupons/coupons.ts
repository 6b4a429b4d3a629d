import { and, desc, eq, inArray, sql } from "drizzle-orm";
import type { Executor, Tx } from "~/server/db/client";
import { COUPON_REDEMPTION_MACHINE } from "~/server/db/machines";
import { isOrder, type OrderRef } from "~/server/db/order-ref";
import { benefitGrant, benefitReversal, couponRedemption } from "~/server/db/schema";
import { DomainError } from "~/server/errors";

/**
 * Coupons: granted by the benefits consumer when an order is paid, redeemed by
 * their owner on a later order — at most once at a time, under the unique index
 * on a coupon's ACTIVE redemption, in the order's own transaction.
 *
 * The policy, in full (docs and reconciliation follow it):
 * - only the owner can redeem a coupon, on an order worth more than the coupon
 *   (the rest is paid; a payment is never for nothing);
 * - cancelling the order, its timing out, or its full refund releases the coupon,
 *   and it can be spent again;
 * - a shopper's refund that leaves the order that *granted* the coupon keeping less
 *   than the coupon's value revokes it if it is unspent; if it is spent, the refund
 *   may take at most what leaves the coupon's value with the order (the refund
 *   says how much). An automatic refund in full (the order could not be filled)
 *   revokes it too; spent, the order that spent it keeps its discount (the shopper
 *   paid for that order in good faith), and it is never spendable again.
 */
export interface Coupon {
  code: string;
  userId: string;
  valueCents: number;
  /** The order that earned it. */
  grantedBy: string;
}

/**
 * The shopper's coupon, locked until the transaction ends: redemptions and revocations of one coupon take
 * turns. Another shopper's code finds nothing (and is looked for on this shopper's rows only).
 */
async function lockCoupon(tx: Tx, userId: string, code: string): Promise<Coupon | undefined> {
  const [row] = await tx
    .select({
      code: benefitGrant.code,
      userId: benefitGrant.userId,
      valueCents: benefitGrant.amount,
      grantedBy: benefitGrant.orderId,
    })
    .from(benefitGrant)
    .where(
      and(
        eq(benefitGrant.userId, userId),
        eq(benefitGrant.code, code),
        eq(benefitGrant.benefitType, "COUPON"),
      ),
    )
    .for("update");
  return row?.code ? { ...row, code: row.code } : undefined;
}

async function isRevoked(tx: Executor, coupon: Coupon): Promise<boolean> {
  const [reversal] = await tx
    .select({ id: benefitReversal.id })
    .from(benefitReversal)
    .where(
      and(
        isOrder(benefitReversal, benefitReversal.orderId, {
          userId: coupon.userId,
          orderId: coupon.grantedBy,
        }),
        eq(benefitReversal.benefitType, "COUPON"),
      ),
    );
  return reversal !== undefined;
}

/**
 * What the coupon takes off an order of `subtotalCents`, checked and locked for the
 * order's transaction; `redeem` then records it. Another shopper's coupon reads as
 * an unknown one.
 */
export async function discountFor(
  tx: Tx,
  userId: string,
  code: string,
  subtotalCents: number,
): Promise<{ coupon: Coupon; discountCents: number }> {
  const coupon = await lockCoupon(tx, userId, code);
  if (!coupon) {
    throw new DomainError("COUPON_NOT_FOUND", `you have no coupon ${code}`, { meta: { couponCode: code } });
  }
  if (await isRevoked(tx, coupon)) {
    throw new DomainError(
      "COUPON_NOT_APPLICABLE",
      "this coupon was revoked: the order that earned it was refunded",
      {
        meta: { couponCode: code },
      },
    );
  }
  if (subtotalCents <= coupon.valueCents) {
    throw new DomainError(
      "COUPON_NOT_APPLICABLE",
      `this coupon needs an order worth more than ${coupon.valueCents} cents`,
      { meta: { couponCode: code, minimumCents: coupon.valueCents + 1 } },
    );
  }
  return { coupon, discountCents: coupon.valueCents };
}

/**
 * Spends the coupon on the order, in the order's transaction. The unique index on a
 * coupon's ACTIVE redemption decides between two orders at once (also over two app
 * instances): the loser's whole order rolls back with COUPON_ALREADY_USED.
 */
export async function redeem(
  tx: Tx,
  redemption: { code: string; userId: string; orderId: string; discountCents: number },
): Promise<void> {
  const [spent] = await tx
    .insert(couponRedemption)
    .values({ ...redemption, status: COUPON_REDEMPTION_MACHINE.transitions.redeem.to })
    .onConflictDoNothing({ target: couponRedemption.code, where: sql`status = 'ACTIVE'` })
    .returning({ id: couponRedemption.id });
  if (!spent) {
    throw new DomainError("COUPON_ALREADY_USED", "this coupon is already used by another order", {
      meta: { couponCode: redemption.code },
    });
  }
}

const RELEASE = COUPON_REDEMPTION_MACHINE.transitions.release;

/** The order ended without being paid for (cancelled, timed out) or was refunded in full: its coupon comes back. */
export async function releaseCoupon(tx: Tx, order: OrderRef): Promise<void> {
  await tx
    .update(couponRedemption)
    .set({ status: RELEASE.to, releasedAt: sql`now()` })
    .where(
      and(
        isOrder(couponRedemption, couponRedemption.orderId, order),
        inArray(couponRedemption.status, RELEASE.from),
      ),
    );
}

/**
 * What the order that granted the coupon keeps fell below its value (a shopper's refund), or it was
 * refunded in full: the coupon is revoked, once (the reversal's unique key). Spent already (only an
 * automatic refund gets here then: a shopper's refund holds the coupon's value back instead), the
 * spending order keeps its discount and the reversal records 0 cents taken back.
 */
export async function revokeCoupon(tx: Tx, grantingOrder: OrderRef, refundId: string): Promise<boolean> {
  const coupon = await couponEarnedBy(tx, grantingOrder);
  if (!coupon) return false;
  const [revoked] = await tx
    .insert(benefitReversal)
    .values({
      ...grantingOrder,
      refundId,
      benefitType: "COUPON",
      amount: coupon.spent ? 0 : coupon.valueCents,
    })
    .onConflictDoNothing({
      target: [benefitReversal.userId, benefitReversal.orderId],
      where: sql`benefit_type = 'COUPON'`,
    })
    .returning({ id: benefitReversal.id });
  return revoked !== undefined;
}

/**
 * The coupon an order earned, locked until the transaction ends (a spend of it waits), with whether it is
 * spent on an order now and whether it was revoked; none when the order earned none.
 */
export async function couponEarnedBy(tx: Tx, order: OrderRef) {
  const [grant] = await tx
    .select({ code: benefitGrant.code })
    .from(benefitGrant)
    .where(and(isOrder(benefitGrant, benefitGrant.orderId, order), eq(benefitGrant.benefitType, "COUPON")));
  if (!grant?.code) return undefined;
  const coupon = await lockCoupon(tx, order.userId, grant.code);
  if (!coupon) return undefined;
  const [active] = await tx
    .select({ orderId: couponRedemption.orderId })
    .from(couponRedemption)
    .where(
      and(
        eq(couponRedemption.userId, coupon.userId),
        eq(couponRedemption.code, coupon.code),
        eq(couponRedemption.status, "ACTIVE"),
      ),
    );
  return { ...coupon, spent: active !== undefined, revoked: await isRevoked(tx, coupon) };
}

export type CouponState = "AVAILABLE" | "USED" | "REVOKED";

/** The shopper's coupons, newest first, with where each stands. */
export async function listCoupons(db: Executor, userId: string) {
  const rows = await db
    .select({
      code: benefitGrant.code,
      valueCents: benefitGrant.amount,
      grantedBy: benefitGrant.orderId,
      createdAt: benefitGrant.createdAt,
      // Qualified by hand: inside sql`` drizzle may name a column without its table.
      usedOn: sql<string | null>`(SELECT r.order_id FROM coupon_redemption r
                                    WHERE r.user_id = benefit_grant.user_id AND r.code = benefit_grant.code
                                      AND r.status = 'ACTIVE')`,
      revoked: sql<boolean>`EXISTS (SELECT 1 FROM benefit_reversal v
                                     WHERE v.user_id = benefit_grant.user_id AND v.order_id = benefit_grant.order_id
                                       AND v.benefit_type = 'COUPON')`,
    })
    .from(benefitGrant)
    .where(and(eq(benefitGrant.userId, userId), eq(benefitGrant.benefitType, "COUPON")))
    .orderBy(desc(benefitGrant.createdAt));
  return rows.map(({ revoked, usedOn, code, ...row }) => ({
    ...row,
    code: code ?? "",
    usedOn,
    state: (usedOn ? "USED" : revoked ? "REVOKED" : "AVAILABLE") as CouponState,
  }));
}
