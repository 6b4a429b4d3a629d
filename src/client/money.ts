export function formatMoney(cents: number, currency = "USD"): string {
  return new Intl.NumberFormat("en-US", { style: "currency", currency }).format(cents / 100);
}

export interface MoneySummary {
  currency: string;
  paidCents: number;
  backCents: number;
  onItsWayCents: number;
  keptCents: number;
}

/** Where the shopper's money is, in words: "Paid $45.00; $45.00 on its way back to you." */
export function moneyInWords(money: MoneySummary): string {
  const f = (cents: number) => formatMoney(cents, money.currency);
  if (money.paidCents === 0) return "Nothing paid.";
  const parts = [`Paid ${f(money.paidCents)}`];
  if (money.backCents > 0) {
    parts.push(
      money.backCents === money.paidCents ? "all of it back with you" : `${f(money.backCents)} back with you`,
    );
  }
  if (money.onItsWayCents > 0) parts.push(`${f(money.onItsWayCents)} on its way back to you`);
  if (money.keptCents > 0 && money.keptCents !== money.paidCents)
    parts.push(`${f(money.keptCents)} kept for the order`);
  return `${parts.join("; ")}.`;
}
