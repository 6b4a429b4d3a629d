import { machine } from "~/shared/state-machine";
import { PROVIDER_TRADE_STATUSES } from "./schema";

/**
 * MockPay's trade, as data (the provider's side of a payment): the model checker drives it beside the
 * merchant's machines, and trades.ts and closes.ts take every status they write from here.
 */
export const TRADE_MACHINE = machine({
  name: "MockPay trade",
  table: "provider_trade",
  states: PROVIDER_TRADE_STATUSES,
  transitions: {
    open: { from: [], to: "WAITING", on: "the shopper opens the merchant's signed pay link" },
    closeUnopened: {
      from: [],
      to: "CLOSED",
      on: "the merchant closes a trade nobody opened yet (it stays closed when opened later)",
    },
    pay: { from: ["WAITING"], to: "PAID", on: "the shopper's Confirm, before the link expires" },
    close: {
      from: ["WAITING"],
      to: "CLOSED",
      on: "the merchant's close (a cancel, the payment timeout), or a Confirm after the link expired",
    },
  },
});
