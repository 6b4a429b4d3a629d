"use client";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useState } from "react";
import { Status } from "~/client/components/status";
import { StoryPicture } from "~/client/components/story-picture";
import { useCancelOrder } from "~/client/hooks/use-cancel-order";
import { usePayOrder } from "~/client/hooks/use-pay-order";
import { useRefundOrder } from "~/client/hooks/use-refund-order";
import { formatMoney, moneyInWords } from "~/client/money";
import { errorData, errorMessage } from "~/client/retry";
import { useTRPC } from "~/client/trpc";

/** Watch the status change without a reload: quickly while money moves, slowly while shipped, not at all once final. */
function refetchEvery(status: string | undefined): number | false {
  if (status === "REFUNDED" || status === "CLOSED") return false;
  return status === "SHIPPED" ? 3_000 : 1_000;
}

export function OrderView({ orderId }: { orderId: string }) {
  const trpc = useTRPC();
  const order = useQuery(
    trpc.orders.get.queryOptions(
      { orderId },
      {
        retry: false,
        // While a payment or fulfilment may be arriving, watch the status change without a reload.
        refetchInterval: (query) => refetchEvery(query.state.data?.status),
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
        <dd>
          <Status kind="order" value={data.status} testId="order-status" explain />
        </dd>
        <dt>Amount</dt>
        <dd data-testid="order-amount">
          {formatMoney(data.amountCents, data.currency)}
          {data.discountCents > 0 && (
            <span className="muted" data-testid="order-discount">
              {" "}
              (a coupon took {formatMoney(data.discountCents, data.currency)} off)
            </span>
          )}
        </dd>
        <dt>Your money</dt>
        <dd>
          <MoneyLine orderId={data.orderId} live={refetchEvery(data.status) !== false} />
        </dd>
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
      {data.status === "PENDING_PAYMENT" && <CancelButton orderId={data.orderId} />}
      {data.status === "PENDING_PAYMENT" && <CheckStatusButton orderId={data.orderId} />}
      <PaymentTimeline orderId={data.orderId} live={data.status === "PENDING_PAYMENT"} />
      <Refunds
        orderId={data.orderId}
        currency={data.currency}
        items={data.items}
        refundable={["PAID", "SHIPPED", "STOCK_SHORT"].includes(data.status)}
      />
      <Story orderId={data.orderId} live={refetchEvery(data.status) !== false} />
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

function CancelButton({ orderId }: { orderId: string }) {
  const { cancel, isPending, error } = useCancelOrder(orderId);
  return (
    <p>
      <button type="button" disabled={isPending} onClick={cancel}>
        {isPending ? "Cancelling…" : "Cancel order"}
      </button>
      {error && (
        <span role="alert" className="error">
          {" "}
          {errorMessage(error)}
        </span>
      )}
    </p>
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
            Payment <code>{p.outTradeNo}</code>:{" "}
            <Status kind="payment" value={p.status} testId="payment-status" />
            {p.transactionId && (
              <>
                {" "}
                · transaction <code>{p.transactionId}</code>
              </>
            )}
            {p.status === "PAID_LATE" && (
              <p role="status" className="notice" data-testid="late-payment">
                This payment arrived after the order had stopped waiting for it. It is being refunded to you
                in full, automatically: see the refunds below.
              </p>
            )}
          </li>
        ))}
        {data.notifications.map((n) => (
          <li key={n.id} data-testid="notification">
            {n.receivedAt.toLocaleTimeString()} · {n.type ?? "?"} ·{" "}
            <Status kind="notification" value={n.outcome} /> ({n.httpStatus})
            {n.alert && <span className="alert"> · alert</span>} <span className="muted">{n.detail}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Every duplicate that reached this order, and the layer that absorbed it (recorded once a second). */
function Story({ orderId, live }: { orderId: string; live: boolean }) {
  const trpc = useTRPC();
  const story = useQuery(
    trpc.orders.story.queryOptions({ orderId }, { refetchInterval: live ? 2_000 : false }),
  );
  if (!story.data) return null;
  return (
    <section aria-labelledby="story-heading">
      <h3 id="story-heading">What happened to this order</h3>
      <p className="muted small">
        Every copy of every request that reached this order, lane by layer: {story.data.absorbed} absorbed,
        each effect once.
      </p>
      <StoryPicture story={story.data} />
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

/** Where the shopper's money is, from the merchant's ledger, in words. */
function MoneyLine({ orderId, live }: { orderId: string; live: boolean }) {
  const trpc = useTRPC();
  const money = useQuery(
    trpc.orders.money.queryOptions({ orderId }, { refetchInterval: live ? 1_000 : false }),
  );
  if (!money.data) return <span className="muted">…</span>;
  return <span data-testid="order-money">{moneyInWords(money.data)}</span>;
}

function Refunds(props: {
  orderId: string;
  currency: string;
  refundable: boolean;
  items: { skuId: string; name: string; quantity: number }[];
}) {
  const trpc = useTRPC();
  const refunds = useQuery(
    trpc.refunds.list.queryOptions(
      { orderId: props.orderId },
      {
        refetchInterval: (query) =>
          query.state.data?.some((r) => r.status === "REFUND_CREATED" || r.status === "REFUND_PROCESSING")
            ? 1_000
            : false,
      },
    ),
  );
  const { refund, isPending, error } = useRefundOrder(props.orderId);
  // What can still be asked back is the ledger's (what the order keeps of its payment), not a sum made here.
  const money = useQuery(trpc.orders.money.queryOptions({ orderId: props.orderId }));
  const remaining = money.data?.refundableCents ?? 0;
  const [amount, setAmount] = useState("");
  const cents = amount === "" ? remaining : Math.round(Number(amount) * 100);
  return (
    <section aria-labelledby="refunds-heading">
      <h3 id="refunds-heading">Refunds</h3>
      {refunds.data?.length ? (
        <ul className="timeline">
          {refunds.data.map((r) => (
            <li key={r.refundNo} data-testid="refund">
              <code>{r.refundNo}</code> · {formatMoney(r.amountCents, r.currency)} ·{" "}
              <Status kind="refund" value={r.status} testId="refund-status" />{" "}
              {r.lines.length > 0 && (
                <span className="muted">
                  gives back {r.lines.map((l) => `${l.quantity} × ${l.skuId}`).join(", ")}{" "}
                </span>
              )}
              <span className="muted">{r.failureReason ?? r.reason}</span>
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted">No refund.</p>
      )}
      {props.refundable && remaining > 0 && (
        <p className="refund-form">
          <label>
            Amount ({props.currency}){" "}
            <input
              type="number"
              min="0.01"
              step="0.01"
              placeholder={(remaining / 100).toFixed(2)}
              value={amount}
              onChange={(e) => setAmount(e.target.value)}
            />
          </label>{" "}
          <button
            type="button"
            disabled={isPending || !(cents > 0 && cents <= remaining)}
            onClick={() => refund(cents)}
          >
            {isPending ? "Requesting refund…" : "Request refund"}
          </button>
        </p>
      )}
      {props.refundable && remaining > 0 && (
        <p className="refund-form">
          Or give an item back (what it was paid comes back; once shipped, when it reaches us):{" "}
          {props.items.map((item) => (
            <button
              key={item.skuId}
              type="button"
              disabled={isPending}
              onClick={() => refund({ lines: [{ skuId: item.skuId, quantity: 1 }] })}
            >
              Return one {item.name}
            </button>
          ))}
        </p>
      )}
      {error && (
        <p role="alert" className="error">
          {errorMessage(error)}
        </p>
      )}
    </section>
  );
}
