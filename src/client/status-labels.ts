/**
 * What each machine status means to a person, and what happens next. The pages show the label with the
 * machine name beside it (the name is what the API, the logs and the database say). Plain data: the
 * shop's pages and the operations page both read it; test/status-labels.test.ts checks that every
 * status the schema allows has one.
 */
export interface StatusText {
  label: string;
  /** What happens next, or why it stays this way. */
  next: string;
  tone: "waiting" | "good" | "done" | "bad" | "neutral";
}

export const ORDER_STATUS_TEXT: Record<string, StatusText> = {
  PENDING_PAYMENT: {
    label: "Awaiting payment",
    next: "Pay at MockPay. Unpaid orders close by themselves when the payment time runs out.",
    tone: "waiting",
  },
  PAID: { label: "Paid", next: "Stock is taken and points granted; it ships in a moment.", tone: "good" },
  SHIPPED: { label: "Shipped", next: "On its way. You can still ask for a refund.", tone: "done" },
  STOCK_SHORT: {
    label: "Paid, out of stock",
    next: "Stock ran out after you paid: the money goes back to you automatically.",
    tone: "bad",
  },
  CLOSED: { label: "Closed", next: "Cancelled or never paid. Nothing was charged.", tone: "neutral" },
  REFUNDED: {
    label: "Refunded",
    next: "All the money went back, with the stock and points.",
    tone: "neutral",
  },
};

export const PAYMENT_STATUS_TEXT: Record<string, StatusText> = {
  PENDING: { label: "Waiting for MockPay", next: "Confirm the payment on MockPay's page.", tone: "waiting" },
  SUCCESS: { label: "Paid", next: "MockPay took the money.", tone: "good" },
  CLOSED: { label: "Closed", next: "This payment can no longer be paid.", tone: "neutral" },
  FAILED: { label: "Failed", next: "MockPay refused it; nothing was charged.", tone: "bad" },
  PAID_LATE: {
    label: "Paid too late",
    next: "The money arrived after the order stopped waiting for it: it goes back in full.",
    tone: "bad",
  },
};

export const REFUND_STATUS_TEXT: Record<string, StatusText> = {
  REFUND_AWAITING_GOODS: {
    label: "Awaiting the goods",
    next: "Send the items back: the money is refunded once they arrive.",
    tone: "waiting",
  },
  REFUND_CREATED: { label: "Requested", next: "Sent to MockPay in a moment.", tone: "waiting" },
  REFUND_PROCESSING: { label: "At MockPay", next: "MockPay is returning the money.", tone: "waiting" },
  REFUND_SUCCESS: { label: "Refunded", next: "The money is back.", tone: "done" },
  REFUND_FAILED: {
    label: "Rejected by MockPay",
    next: "The money is still held; an operator retries it from /admin.",
    tone: "bad",
  },
  REFUND_SUPERSEDED: {
    label: "No longer needed",
    next: "Other refunds already returned what this one would have.",
    tone: "neutral",
  },
  REFUND_CANCELLED: {
    label: "Return cancelled",
    next: "The goods never came back, so nothing was refunded.",
    tone: "neutral",
  },
};

export const RECORD_STATUS_TEXT: Record<string, StatusText> = {
  PROCESSING: { label: "Being processed", next: "Duplicates wait for its answer.", tone: "waiting" },
  SUCCESS: { label: "Answered", next: "Every duplicate gets this answer again.", tone: "good" },
  FAILED: { label: "Refused", next: "Every duplicate gets the same refusal.", tone: "neutral" },
};

export const NOTIFICATION_OUTCOME_TEXT: Record<string, StatusText> = {
  PROCESSED: { label: "Applied", next: "The fact changed the payment, once.", tone: "good" },
  DUPLICATE: {
    label: "Duplicate, absorbed",
    next: "Already applied; answered success again.",
    tone: "neutral",
  },
  IGNORED: { label: "Ignored", next: "Older than what is known; nothing to do.", tone: "neutral" },
  WRONG_APP: { label: "Not ours", next: "Meant for another merchant account.", tone: "bad" },
  MALFORMED: { label: "Malformed", next: "Signed but unreadable.", tone: "bad" },
  UNKNOWN_PAYMENT: { label: "Unknown payment", next: "No such payment here.", tone: "bad" },
  AMOUNT_MISMATCH: { label: "Wrong amount", next: "Refused and alerted.", tone: "bad" },
  TRANSACTION_CLASH: {
    label: "Transaction clash",
    next: "Its transaction id belongs to another payment.",
    tone: "bad",
  },
  ERROR: { label: "Error", next: "Failed here; MockPay sends it again.", tone: "bad" },
};

export const STATUS_TEXTS = {
  order: ORDER_STATUS_TEXT,
  payment: PAYMENT_STATUS_TEXT,
  refund: REFUND_STATUS_TEXT,
  record: RECORD_STATUS_TEXT,
  notification: NOTIFICATION_OUTCOME_TEXT,
} as const;

export type StatusKind = keyof typeof STATUS_TEXTS;

/** The text for a status; an unknown one reads as itself rather than failing the page. */
export function statusText(kind: StatusKind, status: string): StatusText {
  return STATUS_TEXTS[kind][status] ?? { label: status, next: "", tone: "neutral" };
}
