import Link from "next/link";
import { notFound } from "next/navigation";
import { Status } from "~/client/components/status";
import { StoryPicture } from "~/client/components/story-picture";
import { getAppContext } from "~/server/app-context";
import { getOrderForOperator } from "~/server/orders/queries";
import { orderIdParams } from "~/server/orders/schema";
import { orderStory } from "~/server/orders/story";

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
      <h3>What happened to this order</h3>
      <StoryPicture story={story} />
    </section>
  );
}
