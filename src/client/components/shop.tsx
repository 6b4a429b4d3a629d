"use client";
import { useQuery } from "@tanstack/react-query";
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
  const { cart, ready, setQuantity, clear } = useCart();

  const onPlaced = useCallback(
    (order: PlacedOrder) => {
      clear();
      router.push(`/orders/${order.orderId}`);
    },
    [clear, router],
  );
  const checkout = usePlaceOrder({ cart, cartReady: ready, onPlaced });

  const products = catalog.data ?? [];
  const total = products.reduce((sum, p) => sum + p.priceCents * (cart[p.id] ?? 0), 0);
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
          {itemCount} item{itemCount === 1 ? "" : "s"} · <strong>{formatMoney(total)}</strong>
        </p>
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

/** The shopper's token for the REST API (README: "REST API"). */
function ApiToken() {
  const trpc = useTRPC();
  const me = useQuery(trpc.session.me.queryOptions());
  if (!me.data) return null;
  return (
    <details className="small">
      <summary>REST API token</summary>
      <code data-testid="api-token">{me.data.apiToken}</code>
      <p className="muted">
        Use it as <code>Authorization: Bearer …</code> with <code>/api/v1</code>; see{" "}
        <a href="/api/v1/openapi.json">the OpenAPI document</a>.
      </p>
    </details>
  );
}
