import type { Tx } from "~/server/db/client";
import type { paymentOrder } from "~/server/db/schema";
import type { NotificationBody } from "~/shared/provider-contract";
import type { Verdict } from "./verdict";

/**
 * The refunds capability as payments reaches it. Payments sits below refunds (docs/architecture.md, "A
 * direction between capabilities"), so it names here what it hands over, and the app gives it refunds' own
 * functions (src/server/refunds/facts.ts, wired at the composition root): a provider fact about a refund is
 * routed to refunds, and money a payment took that its order will not keep is handed to refunds as a refund
 * owed. Payments never writes a refund row itself.
 */
export interface RefundsPort {
  /** The provider says a refund went through / was refused: refunds applies it (in this transaction). */
  succeeded(tx: Tx, payment: typeof paymentOrder.$inferSelect, n: NotificationBody): Promise<Verdict>;
  failed(tx: Tx, payment: typeof paymentOrder.$inferSelect, n: NotificationBody): Promise<Verdict>;
  /** Money the system owes back (a late payment's, in full): recorded once per number, in this transaction (true: now). */
  owed(tx: Tx, refund: OwedRefund): Promise<boolean>;
}

export interface OwedRefund {
  userId: string;
  /** Under `sys/`, which no shopper's refund number may hold. */
  refundNo: string;
  orderId: string;
  paymentId: string;
  amountCents: number;
  currency: string;
  reason: string;
}
