import type { RefundsPort } from "~/server/payments/refunds-port";
import { applyRefundFailed, applyRefundSucceeded } from "./complete-refund";
import { recordSystemRefund } from "./transitions";

/** What refunds does with the facts payments routes here (src/server/payments/refunds-port.ts). */
export const REFUNDS_PORT: RefundsPort = {
  succeeded: applyRefundSucceeded,
  failed: applyRefundFailed,
  owed: recordSystemRefund,
};
