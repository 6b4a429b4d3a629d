import { RECORD_MACHINE } from "@exactly-once/idempotency";
import { machine } from "~/shared/state-machine";
import {
  CONSUME_STATUSES,
  COUPON_REDEMPTION_STATUSES,
  ORDER_STATUSES,
  PAYMENT_STATUSES,
  REFUND_STATUSES,
} from "./schema";

export { absorbedByUpdate, type Machine, onlyFrom, type Transition } from "~/shared/state-machine";

/**
 * The merchant's state machines, as data: each a table of states and named transitions `FROM → TO`, with
 * what sets each one off. The code's conditional updates take their FROM and TO from here (`UPDATE … SET
 * status = <to> WHERE status IN <from>`: zero rows means someone else moved it first), so a transition
 * that is not in a table cannot be written (test/machines.test.ts fails on a status written any other
 * way), and the model checker reads the same tables. A transition with no FROM is the row's insertion.
 */

export const ORDER_MACHINE = machine({
  name: "order",
  table: "orders",
  states: ORDER_STATUSES,
  transitions: {
    place: { from: [], to: "PENDING_PAYMENT", on: "orders.create, once per request id" },
    pay: { from: ["PENDING_PAYMENT"], to: "PAID", on: "a payment of the order succeeds" },
    close: { from: ["PENDING_PAYMENT"], to: "CLOSED", on: "orders.cancel, or its payment timeout" },
    ship: { from: ["PAID"], to: "SHIPPED", on: "its stock deducted, the shipping consumer" },
    runShort: { from: ["PAID"], to: "STOCK_SHORT", on: "a line cannot be filled (the stock consumer)" },
    refundInFull: {
      from: ["PAID", "SHIPPED", "STOCK_SHORT"],
      to: "REFUNDED",
      on: "the refunds that succeeded add up to its payment",
    },
  },
});

export const PAYMENT_MACHINE = machine({
  name: "payment",
  table: "payment_order",
  states: PAYMENT_STATUSES,
  transitions: {
    open: { from: [], to: "PENDING", on: "payments.create (one open payment per order)" },
    succeed: {
      from: ["PENDING"],
      to: "SUCCESS",
      on: "the provider says paid, while the order awaits payment",
    },
    succeedAfterClose: {
      from: ["CLOSED"],
      to: "SUCCESS",
      on: "a success that crossed a close, while the order awaits payment and no other payment is open",
    },
    close: { from: ["PENDING"], to: "CLOSED", on: "payment.closed, or closed at the provider by a cancel" },
    payLate: {
      from: ["PENDING", "CLOSED"],
      to: "PAID_LATE",
      on: "the provider says paid, but the order no longer awaits this payment (refunded in full)",
    },
    repairLate: {
      from: ["SUCCESS"],
      to: "PAID_LATE",
      on: "reconciliation's repair: a success recorded while its order was being closed (refunded in full)",
    },
  },
});

export const REFUND_MACHINE = machine({
  name: "refund",
  table: "refund_order",
  states: REFUND_STATUSES,
  transitions: {
    record: { from: [], to: "REFUND_CREATED", on: "refunds.create, a stock-short order, or a late payment" },
    askReturn: {
      from: [],
      to: "REFUND_AWAITING_GOODS",
      on: "refunds.create naming lines of a shipped order",
    },
    receive: { from: ["REFUND_AWAITING_GOODS"], to: "REFUND_CREATED", on: "the goods are received back" },
    cancelReturn: { from: ["REFUND_AWAITING_GOODS"], to: "REFUND_CANCELLED", on: "the goods never came" },
    accept: { from: ["REFUND_CREATED"], to: "REFUND_PROCESSING", on: "the provider accepted it" },
    reject: { from: ["REFUND_CREATED"], to: "REFUND_FAILED", on: "the provider rejected it" },
    failAfterAcceptance: {
      from: ["REFUND_CREATED", "REFUND_PROCESSING"],
      to: "REFUND_FAILED",
      on: "refund.failed: the provider accepted it, then it failed",
    },
    retry: { from: ["REFUND_FAILED"], to: "REFUND_CREATED", on: "an operator's Retry (its next attempt)" },
    retryAsReturn: {
      from: ["REFUND_FAILED"],
      to: "REFUND_AWAITING_GOODS",
      on: "an operator's Retry of lines whose goods shipped meanwhile: refunded once they are back",
    },
    supersede: { from: ["REFUND_FAILED"], to: "REFUND_SUPERSEDED", on: "other refunds left it no room" },
    reinstate: {
      from: ["REFUND_SUPERSEDED"],
      to: "REFUND_FAILED",
      on: "what took its room failed: it fits again",
    },
    succeed: {
      from: [
        "REFUND_CREATED",
        "REFUND_PROCESSING",
        "REFUND_FAILED",
        "REFUND_SUPERSEDED",
        // Recorded here as rejected (two sends raced), then retried as a return: the provider had paid it.
        "REFUND_AWAITING_GOODS",
      ],
      to: "REFUND_SUCCESS",
      on: "refund.succeeded: the provider's word wins, whatever was recorded here",
    },
  },
});

export const COUPON_REDEMPTION_MACHINE = machine({
  name: "coupon redemption",
  table: "coupon_redemption",
  states: COUPON_REDEMPTION_STATUSES,
  transitions: {
    redeem: { from: [], to: "ACTIVE", on: "an order spends the coupon (at most one ACTIVE per coupon)" },
    release: { from: ["ACTIVE"], to: "RELEASED", on: "the order ends unpaid, or is refunded in full" },
  },
});

export const CONSUME_MACHINE = machine({
  name: "consume record",
  table: "message_consume_record",
  states: CONSUME_STATUSES,
  transitions: {
    claim: { from: [], to: "PROCESSING", on: "a consumer takes an event (once per event and consumer)" },
    finish: { from: ["PROCESSING"], to: "DONE", on: "its effect committed" },
  },
});

/** The record's machine belongs to the idempotency core (packages/idempotency/src/machine.ts); here it joins the app's tables. */
export const IDEMPOTENCY_MACHINE = machine({ ...RECORD_MACHINE, table: "idempotency_record" });

export const MACHINES = [
  ORDER_MACHINE,
  PAYMENT_MACHINE,
  REFUND_MACHINE,
  COUPON_REDEMPTION_MACHINE,
  CONSUME_MACHINE,
  IDEMPOTENCY_MACHINE,
] as const;
