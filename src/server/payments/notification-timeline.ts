import { clientOf, type Db, type Tx } from "~/server/db/client";
import type { Verdict } from "./verdict";

export interface ReceivedMeta {
  deliveryId: string | null;
  notificationId: string | null;
  outTradeNo: string | null;
  type: string | null;
}

/** The payment timeline: every fact the merchant heard, and what it did with it. */
export async function recordReceived(executor: Db | Tx, meta: ReceivedMeta, verdict: Verdict): Promise<void> {
  await clientOf(executor)`
    INSERT INTO payment_notification (notification_id, delivery_id, out_trade_no, type, outcome, detail, alert, http_status)
    VALUES (${meta.notificationId}, ${meta.deliveryId}, ${meta.outTradeNo}, ${meta.type}, ${verdict.outcome},
            ${verdict.detail}, ${verdict.alert ?? false}, ${verdict.httpStatus})`;
}
