"use client";
import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { formatMoney } from "../money";
import { errorData } from "../retry";
import { useTRPC } from "../trpc";

export function OrderView({ orderId }: { orderId: string }) {
  const trpc = useTRPC();
  const order = useQuery(trpc.orders.get.queryOptions({ orderId }, { retry: false }));

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
      <p>
        <Link href="/">Continue shopping</Link>
      </p>
    </article>
  );
}
