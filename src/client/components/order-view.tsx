"use client";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { usePayOrder } from "../hooks/use-pay-order";
import { formatMoney } from "../money";
import { errorData, errorMessage } from "../retry";
import { useTRPC } from "../trpc";

export function OrderView({ orderId }: { orderId: string }) {
  const trpc = useTRPC();
  const order = useQuery(
    trpc.orders.get.queryOptions(
      { orderId },
      {
        retry: false,
        // While a payment or fulfilment may be arriving, watch the status change without a reload.
        refetchInterval: (query) =>
          query.state.data?.status === "PENDING_PAYMENT" || query.state.data?.status === "PAID"
            ? 1_000
            : false,
      },
    ),
  );

  if (order.isLoading) return <p>Loading the order…</p>;
  if (order.error) {
    const notFound = errorData(order.error)?.httpStatus === 404 || errorData(order.error)?.httpStatus === 400;
    return (
      <div role="alert">
        <h2>{notFound ? "Order not found" : "Could not load the order"}</h2>
        <Link href="/">Back to the shop</Link>
      </div>
    );
  }
  const data = order.data;
  if (!data) return null;
  return (
    <article aria-labelledby="order-heading">
      <h2 id="order-heading">Order {data.orderId.slice(0, 8)}</h2>
      <dl className="facts">
        <dt>Status</dt>
        <dd data-testid="order-status">{data.status}</dd>
        <dt>Amount</dt>
        <dd data-testid="order-amount">{formatMoney(data.amountCents, data.currency)}</dd>
        <dt>Placed</dt>
        <dd>{data.createdAt.toLocaleString()}</dd>
        <dt>Request id</dt>
        <dd>
          <code>{data.requestId}</code>
        </dd>
      </dl>
      <table>
        <thead>
          <tr>
            <th scope="col">Item</th>
            <th scope="col">Quantity</th>
            <th scope="col">Price</th>
            <th scope="col">Total</th>
          </tr>
        </thead>
        <tbody>
          {data.items.map((item) => (
            <tr key={item.skuId}>
              <td>{item.name}</td>
              <td>{item.quantity}</td>
              <td>{formatMoney(item.unitPriceCents, data.currency)}</td>
              <td>{formatMoney(item.lineTotalCents, data.currency)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.status === "PENDING_PAYMENT" && <PayButton orderId={data.orderId} />}
      {data.status === "PENDING_PAYMENT" && <CheckStatusButton orderId={data.orderId} />}
      <PaymentTimeline orderId={data.orderId} live={data.status === "PENDING_PAYMENT"} />
      <p>
        <Link href="/">Continue shopping</Link>
      </p>
    </article>
  );
}

function PayButton({ orderId }: { orderId: string }) {
  const { pay, isPending, error } = usePayOrder(orderId);
  return (
    <div className="pay">
      <button type="button" className="primary" disabled={isPending} onClick={pay}>
        {isPending ? "Opening payment…" : "Pay"}
      </button>
      {error && (
        <p role="alert" className="error">
          {errorMessage(error)}
        </p>
      )}
    </div>
  );
}

function PaymentTimeline({ orderId, live }: { orderId: string; live: boolean }) {
  const trpc = useTRPC();
  const timeline = useQuery(
    trpc.payments.timeline.queryOptions({ orderId }, { refetchInterval: live ? 1_000 : 5_000 }),
  );
  const data = timeline.data;
  if (!data || data.payments.length === 0) return null;
  return (
    <section aria-labelledby="timeline-heading">
      <h3 id="timeline-heading">Payment timeline</h3>
      <ul className="timeline">
        {data.payments.map((p) => (
          <li key={p.outTradeNo}>
            Payment <code>{p.outTradeNo}</code>: <strong data-testid="payment-status">{p.status}</strong>
            {p.transactionId && (
              <>
                {" "}
                · transaction <code>{p.transactionId}</code>
              </>
            )}
          </li>
        ))}
        {data.notifications.map((n) => (
          <li key={n.id} data-testid="notification">
            {n.receivedAt.toLocaleTimeString()} · {n.type ?? "?"} · <strong>{n.outcome}</strong> (
            {n.httpStatus}){n.alert && <span className="alert"> · alert</span>}{" "}
            <span className="muted">{n.detail}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** When the provider's notification never comes: ask the provider directly. */
function CheckStatusButton({ orderId }: { orderId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const check = useMutation(
    trpc.payments.checkStatus.mutationOptions({
      onSettled: () => {
        void queryClient.invalidateQueries(trpc.orders.pathFilter());
        void queryClient.invalidateQueries(trpc.payments.pathFilter());
      },
    }),
  );
  return (
    <p>
      <button type="button" disabled={check.isPending} onClick={() => check.mutate({ orderId })}>
        {check.isPending ? "Checking…" : "Check payment status"}
      </button>{" "}
      {check.data && (
        <span className="muted small" role="status">
          {check.data.checked.length === 0
            ? "No payment to check yet."
            : `Provider says ${check.data.checked.map((c) => c.providerStatus).join(", ")}.`}
        </span>
      )}
      {check.error && <span role="alert">{errorMessage(check.error)}</span>}
    </p>
  );
}
