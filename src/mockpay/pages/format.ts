/** An amount in minor units as MockPay shows it to the payer, e.g. "$12.50". */
export function formatAmount(cents: number, currency: string): string {
  return new Intl.NumberFormat("en-US", { style: "currency", currency }).format(cents / 100);
}

/** MockPay's own words for its trade and delivery statuses, shown with the machine name beside them. */
const TRADE_STATUS: Record<string, string> = {
  WAITING: "Waiting for the payer",
  PAID: "Paid",
  CLOSED: "Closed",
};
const DELIVERY_STATUS: Record<string, string> = {
  PENDING: "Delivering",
  DELIVERED: "Delivered",
  GAVE_UP: "Gave up",
};

export function tradeStatusLabel(status: string): string {
  return TRADE_STATUS[status] ?? status;
}

export function deliveryStatusLabel(status: string): string {
  return DELIVERY_STATUS[status] ?? status;
}
