"use client";
import { useMutation, useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useCallback } from "react";
import { useCart } from "~/client/hooks/use-cart";
import { useHydrated } from "~/client/hooks/use-hydrated";
import { type PlacedOrder, usePlaceOrder } from "~/client/hooks/use-place-order";
import { formatMoney } from "~/client/money";
import { errorData, errorMessage, isRetryable } from "~/client/retry";
import { useTRPC } from "~/client/trpc";

export function Shop() {
  const trpc = useTRPC();
  const router = useRouter();
  const hydrated = useHydrated();
  const catalog = useQuery(trpc.catalog.list.queryOptions());
  const { cart, ready, setQuantity, clear, couponCode, chooseCoupon } = useCart();
  const coupons = useQuery(trpc.coupons.list.queryOptions());

  const onPlaced = useCallback(
    (order: PlacedOrder) => {
      clear();
      router.push(`/orders/${order.orderId}`);
    },
    [clear, router],
  );
  const checkout = usePlaceOrder({ cart, couponCode, cartReady: ready, onPlaced });

  const products = catalog.data ?? [];
  const subtotal = products.reduce((sum, p) => sum + p.priceCents * (cart[p.id] ?? 0), 0);
  const usable = (coupons.data ?? []).filter((c) => c.state === "AVAILABLE" || c.code === couponCode);
  const coupon = usable.find((c) => c.code === couponCode);
  const discount = coupon && subtotal > coupon.valueCents ? coupon.valueCents : 0;
  const total = subtotal - discount;
  const itemCount = Object.values(cart).reduce((sum, q) => sum + q, 0);
  const locked = checkout.isPending;
  const canPlace = hydrated && ready && itemCount > 0 && !locked && !catalog.isLoading;

  return (
    <div className="layout">
      <section aria-labelledby="catalogue-heading">
        <h2 id="catalogue-heading">Catalogue</h2>
        {catalog.isLoading && <p>Loading the catalogue…</p>}
        {catalog.error && <p role="alert">Could not load the catalogue: {catalog.error.message}</p>}
        <ul className="products">
          {products.map((product) => {
            const quantity = cart[product.id] ?? 0;
            return (
              <li key={product.id} className="product">
                <div>
                  <strong>{product.name}</strong>
                  <p className="muted">{product.description}</p>
                  <p>
                    {formatMoney(product.priceCents, product.currency)}{" "}
                    <span className="muted">· {product.stock} in stock</span>
                  </p>
                </div>
                <div className="stepper">
                  <button
                    type="button"
                    aria-label={`Remove one ${product.name}`}
                    disabled={!hydrated || locked || quantity === 0}
                    onClick={() => setQuantity(product.id, quantity - 1)}
                  >
                    −
                  </button>
                  <output aria-label={`Quantity of ${product.name}`}>{quantity}</output>
                  <button
                    type="button"
                    aria-label={`Add one ${product.name}`}
                    disabled={!hydrated || locked || quantity >= 99}
                    onClick={() => setQuantity(product.id, quantity + 1)}
                  >
                    +
                  </button>
                </div>
              </li>
            );
          })}
        </ul>
      </section>

      <aside aria-labelledby="cart-heading" className="cart">
        <h2 id="cart-heading">Cart</h2>
        <p>
          {itemCount} item{itemCount === 1 ? "" : "s"} ·{" "}
          <strong data-testid="cart-total">{formatMoney(total)}</strong>
          {discount > 0 && <span className="muted"> ({formatMoney(discount)} off)</span>}
        </p>
        {usable.length > 0 && (
          <label className="coupon">
            Coupon{" "}
            <select
              value={couponCode ?? ""}
              disabled={!hydrated || locked}
              onChange={(event) => chooseCoupon(event.target.value || null)}
            >
              <option value="">none</option>
              {usable.map((c) => (
                <option key={c.code} value={c.code}>
                  {c.code} · {formatMoney(c.valueCents)} off
                </option>
              ))}
            </select>
          </label>
        )}
        <button type="button" className="primary" disabled={!canPlace} onClick={checkout.place}>
          {locked ? "Placing order…" : "Place order"}
        </button>
        {locked && checkout.failureCount > 0 && (
          <p className="muted" role="status">
            Connection trouble; retrying with the same key (attempt {checkout.failureCount + 1})…
          </p>
        )}
        {checkout.error && !locked && <CheckoutError error={checkout.error} onRetry={checkout.place} />}
        {checkout.requestId && (
          <p className="muted small">
            Checkout key <code data-testid="request-id">{checkout.requestId}</code>
          </p>
        )}
        <OrderList />
        <ApiToken />
      </aside>
    </div>
  );
}

function CheckoutError({ error, onRetry }: { error: unknown; onRetry: () => void }) {
  const retryable = isRetryable(error);
  const data = errorData(error);
  return (
    <div role="alert" className="error">
      <p>{errorMessage(error)}</p>
      {retryable ? (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      ) : (
        <p className="muted small">
          {data?.domainCode === "OUT_OF_STOCK" || data?.domainCode === "SKU_NOT_FOUND"
            ? "Change your cart to place a new order."
            : data?.domainCode?.startsWith("COUPON_")
              ? "Choose another coupon, or none, to place a new order. Nothing was charged or ordered."
              : "Nothing was charged or ordered."}
        </p>
      )}
    </div>
  );
}

function OrderList() {
  const trpc = useTRPC();
  const orders = useQuery(trpc.orders.list.queryOptions());
  if (!orders.data?.length) return null;
  return (
    <nav aria-labelledby="orders-heading">
      <h2 id="orders-heading">Your orders</h2>
      <ul className="orders">
        {orders.data.map((order) => (
          <li key={order.orderId}>
            <Link href={`/orders/${order.orderId}`}>
              {formatMoney(order.amountCents, order.currency)} · {order.status}
            </Link>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/**
 * The shopper's token for the REST API (docs/api.md, "REST API"): made only when asked for, shown
 * once, valid for a day; "Sign out everywhere else" ends every token and every copy of this session.
 */
function ApiToken() {
  const trpc = useTRPC();
  const issue = useMutation(trpc.session.issueApiToken.mutationOptions());
  const revoke = useMutation(trpc.session.revokeAll.mutationOptions({ onSuccess: () => issue.reset() }));
  return (
    <details className="small">
      <summary>REST API token</summary>
      {issue.data ? (
        <p>
          <code data-testid="api-token">{issue.data.token}</code>{" "}
          <span className="muted">valid until {issue.data.expiresAt.toLocaleString()}</span>
        </p>
      ) : (
        <button type="button" onClick={() => issue.mutate()} disabled={issue.isPending}>
          Show an API token
        </button>
      )}{" "}
      <button type="button" onClick={() => revoke.mutate()} disabled={revoke.isPending}>
        Sign out everywhere else
      </button>
      {revoke.data && (
        <span role="status"> Every API token and every other copy of this session is revoked.</span>
      )}
      <p className="muted">
        Use it as <code>Authorization: Bearer …</code> with <code>/api/v1</code>; see{" "}
        <a href="/api/v1/openapi.json">the OpenAPI document</a>.
      </p>
    </details>
  );
}
