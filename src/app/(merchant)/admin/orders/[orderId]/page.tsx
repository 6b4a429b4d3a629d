import Link from "next/link";
import { notFound } from "next/navigation";
import { Status } from "~/client/components/status";
import { StoryPicture } from "~/client/components/story-picture";
import { Table } from "~/client/components/table";
import { formatMoney } from "~/client/money";
import { getAppContext } from "~/server/app-context";
import { orderIdParams } from "~/server/db/order-ref";
import { orderLedger } from "~/server/ledger/ledger";
import { getOrderForOperator } from "~/server/orders/queries";
import { orderStory } from "~/server/story/story";

export const dynamic = "force-dynamic";

/** Any order's story, for the operator: the same picture the shopper sees on the order page. */
export default async function AdminOrderPage({ params }: { params: Promise<{ orderId: string }> }) {
  const parsed = orderIdParams.safeParse(await params);
  if (!parsed.success) notFound();
  const { db } = getAppContext();
  // The operator knows the order's id alone: the one lookup by id (docs/scale-out.md); the rest by its shopper.
  const order = await getOrderForOperator(db, parsed.data.orderId);
  if (!order) notFound();
  const story = await orderStory(db, { userId: order.userId, orderId: order.orderId });
  if (!story) notFound();
  const ledger = await orderLedger(db, { userId: order.userId, orderId: order.orderId });
  const money = (cents: number) => formatMoney(cents, order.currency);
  return (
    <section aria-labelledby="admin-order-heading">
      <p>
        <Link href="/admin" prefetch={false}>
          ← Operations
        </Link>
      </p>
      <h2 id="admin-order-heading">Order {order.orderId.slice(0, 8)}</h2>
      <p>
        <Status kind="order" value={order.status} /> · shopper <code>{order.userId}</code> · request id{" "}
        <code>{order.requestId}</code>
      </p>
      <h3 id="ledger-heading">Its money (the ledger)</h3>
      <p className="muted small">
        Every movement of money, posted with the change that caused it, once per fact: balances per payment
        are money in less money out. The shopper's balance is what they have paid and not had back (negated);
        the order keeps its revenue; refunds owed are on their way back.
      </p>
      <Table
        columns={["Payment", "Status", "Shopper", "Kept by the order", "Refunds owed"]}
        empty="No money has moved for this order."
        count={ledger.payments.length}
      >
        {ledger.payments.map((payment) => (
          <tr key={payment.paymentId} data-testid="ledger-payment">
            <td>
              <code>{payment.outTradeNo}</code>
            </td>
            <td>
              <Status kind="payment" value={payment.status} />
            </td>
            <td>{money(payment.balances.shopper)}</td>
            <td>{money(payment.balances.revenue)}</td>
            <td>{money(payment.balances.refunds_payable)}</td>
          </tr>
        ))}
      </Table>
      <Table
        columns={["When", "Fact", "From", "To", "Amount"]}
        empty="No transfer."
        count={ledger.transfers.length}
      >
        {ledger.transfers.map((transfer) => (
          <tr key={transfer.id} data-testid="ledger-transfer">
            <td>{transfer.createdAt.toLocaleTimeString()}</td>
            <td>
              <code>{transfer.factKey}</code>
            </td>
            <td>{transfer.fromAccount}</td>
            <td>{transfer.toAccount}</td>
            <td>{money(transfer.amountCents)}</td>
          </tr>
        ))}
      </Table>
      <h3>What happened to this order</h3>
      <StoryPicture story={story} />
    </section>
  );
}
