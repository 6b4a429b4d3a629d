import { getMockPayContext } from "~/mockpay/server/context";
import { isMockPayError } from "~/mockpay/server/errors";
import { openTrade, type ProviderTrade } from "~/mockpay/server/trades";
import { payRequestSchema } from "~/shared/provider-contract";
import { formatAmount } from "./format";

/** MockPay's hosted page: what the shopper sees after "Pay" on the merchant's order page. */
export default async function PayPage({
  searchParams,
}: {
  params: Promise<{ outTradeNo: string }>;
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const parsed = payRequestSchema.safeParse(await searchParams);
  let trade: ProviderTrade | undefined;
  let problem: string | undefined;
  if (!parsed.success) problem = "This payment link is incomplete.";
  else {
    const { sig, ...request } = parsed.data;
    try {
      const mockPay = getMockPayContext();
      trade = await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
    } catch (error) {
      // A refused link is the shopper's to read; a database that is away is an error page (try again).
      if (!isMockPayError(error)) throw error;
      problem = error.message;
    }
  }
  return (
    <section className="checkout" aria-labelledby="provider-heading">
      <p className="muted small">Paying a merchant through MockPay</p>
      <h2 id="provider-heading">Pay {trade ? formatAmount(trade.amountCents, trade.currency) : ""}</h2>
      {problem && <p role="alert">{problem}</p>}
      {trade && (
        <>
          <dl className="facts">
            <dt>Merchant trade</dt>
            <dd>
              <code>{trade.outTradeNo}</code>
            </dd>
            <dt>Status</dt>
            <dd data-testid="trade-status">{trade.status}</dd>
          </dl>
          {trade.status === "WAITING" ? (
            <div className="actions">
              <form
                method="post"
                action={`/provider/api/trades/${encodeURIComponent(trade.outTradeNo)}/confirm`}
              >
                <button type="submit" className="primary">
                  Confirm payment
                </button>
              </form>
              <form
                method="post"
                action={`/provider/api/trades/${encodeURIComponent(trade.outTradeNo)}/cancel`}
              >
                <button type="submit">Cancel</button>
              </form>
            </div>
          ) : (
            <p>
              <a href={trade.returnUrl}>Back to the shop</a>
            </p>
          )}
        </>
      )}
    </section>
  );
}
