import type { Db, Tx } from "~/server/db/client";
import type { Observer } from "~/server/observability/observer";
import { violatedConstraint } from "~/shared/postgres-driver";
import {
  DELIVERY_ID_HEADER,
  MERCHANT_SUCCESS_BODY,
  type NotificationBody,
  notificationBodySchema,
  SIGNATURE_HEADER,
  verifyBodySignature,
} from "~/shared/provider-contract";
import { applyProviderFact } from "./notification-apply";
import { type ReceivedMeta, recordReceived } from "./notification-timeline";
import { alreadyApplied, factKey, inTurn } from "./notification-turns";
import type { RefundsPort } from "./refunds-port";
import type { RefusalTally } from "./refused-notifications";
import {
  type StandardWebhookHeaders,
  type StandardWebhookKeys,
  verifyStandardWebhook,
} from "./standard-webhooks";
import { refuse, type Verdict } from "./verdict";

/**
 * A provider notification, first phase: read and verify it (signature, body, app id), then hand it to the
 * copies' turns (./notification-turns.ts) and to the transaction that applies its fact
 * (./notification-apply.ts).
 */

export interface NotifyDeps {
  webhookSecret: string;
  /** What deliveries signed as Standard Webhooks are checked with (none: they are refused as unsigned). */
  standardWebhooks?: StandardWebhookKeys;
  appId: string;
  toleranceS: number;
  now?: () => Date;
  observer?: Observer;
  /** Where notifications that fail verification are counted (see ./refused-notifications.ts). */
  refusals?: RefusalTally;
  /** Where refund facts, and refunds owed, go (./refunds-port.ts). */
  refunds: RefundsPort;
}

export interface RawNotification {
  body: string;
  signature: string | null;
  deliveryId: string | null;
  /** The delivery's Standard Webhooks headers, when it carries `webhook-id`: checked instead of `signature`. */
  standard?: StandardWebhookHeaders;
}

/**
 * A delivery as it arrived, from its body and headers. One signed as Standard Webhooks names itself by
 * `webhook-id` (the same on every attempt, and what it is deduped by) and is checked that way; any other by
 * the provider's own signature header and delivery id.
 */
export function rawNotification(body: string, header: (name: string) => string | null): RawNotification {
  const signature = header(SIGNATURE_HEADER);
  const webhookId = header("webhook-id");
  if (!webhookId) return { body, signature, deliveryId: header(DELIVERY_ID_HEADER) };
  return {
    body,
    signature,
    deliveryId: webhookId,
    standard: {
      id: webhookId,
      timestamp: header("webhook-timestamp"),
      signature: header("webhook-signature"),
    },
  };
}

export interface NotifyAnswer {
  httpStatus: number;
  body: { code: "SUCCESS" | "FAIL"; message?: string };
}

/**
 * The merchant's side of a provider notification. Checks, in order: signature
 * and timestamp, app id, payment exists, amount and currency; then applies the
 * fact with conditional updates, so any number of copies, in any order and at
 * the same moment, change the state once. Every verified notification is
 * recorded with its outcome; one that fails verification is only counted. A 200
 * tells the provider to stop; anything else, to send again.
 */
export async function handlePaymentNotification(
  db: Db,
  raw: RawNotification,
  deps: NotifyDeps,
): Promise<NotifyAnswer> {
  const nowS = Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  const signature = raw.standard
    ? verifyStandardWebhook(raw.standard, raw.body, deps.standardWebhooks ?? { secrets: [], publicKeys: [] })
    : verifyBodySignature("notification", deps.webhookSecret, raw.body, raw.signature, nowS, deps.toleranceS);
  const parsed = parseBody(raw.body);
  const meta: ReceivedMeta = {
    deliveryId: raw.deliveryId?.slice(0, 100) ?? null,
    notificationId: parsed?.id ?? null,
    outTradeNo: parsed?.out_trade_no ?? null,
    type: parsed?.type ?? null,
  };
  const record = async (executor: Db | Tx, verdict: Verdict) => {
    await recordReceived(executor, meta, verdict);
    deps.observer?.notification({ ...meta, outcome: verdict.outcome, alert: verdict.alert ?? false });
    return answer(verdict);
  };

  if (signature !== "OK") {
    // Unverified: anyone could have sent it. Counted, never stored as a fact or tied to a payment; its line
    // names the delivery id it came with, as sent (the log's only way to find it).
    const reason = signature === "MALFORMED" ? "UNSIGNED" : signature;
    deps.refusals?.add(reason);
    deps.observer?.notification({
      deliveryId: meta.deliveryId,
      notificationId: null,
      outTradeNo: null,
      type: null,
      outcome: reason,
      alert: false,
    });
    return { httpStatus: 401, body: { code: "FAIL", message: `signature check failed: ${reason}` } };
  }
  if (!parsed) return record(db, refuse("MALFORMED", 400, "body is not a valid notification"));
  if (parsed.app_id !== deps.appId)
    return record(db, refuse("WRONG_APP", 400, `unknown app id ${parsed.app_id}`));

  // Copies of one fact that arrive together (providers send two at once) take turns in this process: the
  // first applies it; those that waited for it wake together and are answered by one statement for all of
  // them, instead of each opening a transaction that waits on the first's row lock to learn the same. Only an
  // order of work: every copy still goes through every check below, and copies on other instances meet in the
  // database (the row locks and conditional updates below).
  const known = (found: Verdict | undefined) => {
    if (found) deps.observer?.notification({ ...meta, outcome: found.outcome, alert: false });
    return found && answer(found);
  };
  const fact = factKey(parsed);
  return inTurn(
    fact,
    async () => {
      // Most copies of a success arrive after it was applied: answered by one statement, no transaction.
      const found = known(await alreadyApplied(db, meta, parsed, fact));
      if (found) return found;
      try {
        return await db.transaction(async (tx) => {
          const verdict = await applyProviderFact(tx, parsed, deps.refunds);
          return record(tx, verdict);
        });
      } catch (error) {
        // Two payments took one transaction id at the same moment: the unique index decided; the loser is the clash.
        if (violatedConstraint(error) !== "payment_order_transaction_id_uq") throw error;
        const clash = `transaction ${parsed.transaction_id} was taken by another payment at the same moment`;
        return record(db, refuse("TRANSACTION_CLASH", 409, clash, true));
      }
    },
    async () => known(await alreadyApplied(db, meta, parsed, fact)),
  );
}

function parseBody(body: string): NotificationBody | null {
  try {
    const result = notificationBodySchema.safeParse(JSON.parse(body));
    return result.success ? result.data : null;
  } catch {
    return null;
  }
}

function answer(verdict: Verdict): NotifyAnswer {
  return verdict.httpStatus === 200
    ? { httpStatus: 200, body: MERCHANT_SUCCESS_BODY }
    : { httpStatus: verdict.httpStatus, body: { code: "FAIL", message: verdict.detail } };
}
