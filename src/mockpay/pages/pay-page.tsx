import { getMockPayContext } from "~/mockpay/server/context";
import { isMockPayError } from "~/mockpay/server/errors";
import { sameSiteReturnPath } from "~/mockpay/server/return-url";
import { openTrade, type ProviderTrade } from "~/mockpay/server/trades";
import { payRequestSchema } from "~/shared/provider-contract";
import { formatAmount, tradeStatusLabel } from "./format";

/** MockPay's hosted page: what the shopper sees after "Pay" on the merchant's order page. */
export default async function PayPage({
  params,
  searchParams,
}: {
  params: Promise<{ outTradeNo: string }>;
  searchParams: Promise<Record<string, string | string[] | undefined>>;
}) {
  const parsed = payRequestSchema.safeParse(await searchParams);
  let trade: ProviderTrade | undefined;
  let problem: string | undefined;
  // The signed link's fields: the buttons post them back (an action needs the link, not just the trade number).
  const link: [string, string][] = parsed.success
    ? Object.entries(parsed.data).map(([k, v]) => [k, String(v)])
    : [];
  // Where a Confirm that took no money comes back to: this very link.
  const here = parsed.success
    ? `/provider/pay/${encodeURIComponent((await params).outTradeNo)}?${new URLSearchParams(link).toString()}`
    : "";
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
            <dd>
              {tradeStatusLabel(trade.status)} <code data-testid="trade-status">{trade.status}</code>
            </dd>
          </dl>
          {trade.status === "CLOSED" && (
            <p role="status" data-testid="trade-closed-reason">
              {trade.expiresAt && trade.expiresAt.getTime() <= Date.now()
                ? "This payment link has expired: nothing was charged. Ask the shop for a new one."
                : "The shop closed this payment: nothing was charged."}
            </p>
          )}
          {trade.status === "WAITING" ? (
            <div className="actions">
              <form
                method="post"
                action={`/provider/api/trades/${encodeURIComponent(trade.outTradeNo)}/confirm`}
              >
                <SignedLinkFields link={link} />
                <input type="hidden" name="back" value={here} />
                <button type="submit" className="primary">
                  Confirm payment
                </button>
              </form>
              <form
                method="post"
                action={`/provider/api/trades/${encodeURIComponent(trade.outTradeNo)}/cancel`}
              >
                <SignedLinkFields link={link} />
                <button type="submit">Cancel</button>
              </form>
            </div>
          ) : (
            <p>
              <a href={sameSiteReturnPath(trade.returnUrl)}>Back to the shop</a>
            </p>
          )}
        </>
      )}
    </section>
  );
}

function SignedLinkFields({ link }: { link: [string, string][] }) {
  return link.map(([name, value]) => <input key={name} type="hidden" name={name} value={value} />);
}
