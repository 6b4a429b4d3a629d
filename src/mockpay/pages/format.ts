/** An amount in minor units as MockPay shows it to the payer, e.g. "$12.50". */
export function formatAmount(cents: number, currency: string): string {
  return new Intl.NumberFormat("en-US", { style: "currency", currency }).format(cents / 100);
}
