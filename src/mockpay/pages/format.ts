/** An amount in minor units as MockPay shows it, e.g. "USD 12.50". */
export function formatAmount(cents: number, currency: string): string {
  return `${currency} ${(cents / 100).toFixed(2)}`;
}
