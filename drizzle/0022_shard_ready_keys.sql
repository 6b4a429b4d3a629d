-- Ready to shard by shopper (issue 16, docs/scale-out.md, test/shard-ready.test.ts). Citus distributes a table
-- by one column and only enforces a unique key that holds it; a shopper's rows must also reference each other by
-- it to sit on one shard. So every shopper-owned table gets user_id (taken from its order, or for an event and a
-- consume record from the order the event is about), its primary key becomes (user_id, id), every unique key
-- leads with user_id, and every reference is (user_id, …) → (user_id, id). The same rows stay unique: a row's
-- user_id is its order's. One transaction (drizzle's migrator), so there is no moment without a constraint.

ALTER TABLE "order_item" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "order_item" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "payment_order" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "payment_order" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "shipment" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "shipment" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "stock_deduct_record" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "refund_line" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "refund_line" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "stock_return_record" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "benefit_reversal" x SET "user_id" = o."user_id" FROM "orders" o WHERE o."id" = x."order_id";--> statement-breakpoint
ALTER TABLE "outbox_event" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "outbox_event" e SET "user_id" = o."user_id" FROM "orders" o
 WHERE e."aggregate_type" = 'order' AND o."id"::text = e."aggregate_id";--> statement-breakpoint
ALTER TABLE "message_consume_record" ADD COLUMN "user_id" text;--> statement-breakpoint
UPDATE "message_consume_record" m SET "user_id" = e."user_id" FROM "outbox_event" e WHERE e."id" = m."event_id";--> statement-breakpoint
ALTER TABLE "order_item" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "payment_order" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "shipment" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "refund_line" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "stock_return_record" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "benefit_reversal" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "outbox_event" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "message_consume_record" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "benefit_grant" DROP CONSTRAINT "benefit_grant_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "benefit_reversal" DROP CONSTRAINT "benefit_reversal_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "benefit_reversal" DROP CONSTRAINT "benefit_reversal_refund_id_refund_order_id_fk";--> statement-breakpoint
ALTER TABLE "coupon_redemption" DROP CONSTRAINT "coupon_redemption_code_benefit_grant_code_fk";--> statement-breakpoint
ALTER TABLE "coupon_redemption" DROP CONSTRAINT "coupon_redemption_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "message_consume_record" DROP CONSTRAINT "message_consume_record_event_id_outbox_event_id_fk";--> statement-breakpoint
ALTER TABLE "order_item" DROP CONSTRAINT "order_item_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "payment_order" DROP CONSTRAINT "payment_order_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "refund_line" DROP CONSTRAINT "refund_line_refund_id_refund_order_id_fk";--> statement-breakpoint
ALTER TABLE "refund_line" DROP CONSTRAINT "refund_line_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "refund_order" DROP CONSTRAINT "refund_order_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "refund_order" DROP CONSTRAINT "refund_order_payment_id_payment_order_id_fk";--> statement-breakpoint
ALTER TABLE "shipment" DROP CONSTRAINT "shipment_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "stock_deduct_record" DROP CONSTRAINT "stock_deduct_record_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "stock_return_record" DROP CONSTRAINT "stock_return_record_refund_id_refund_order_id_fk";--> statement-breakpoint
ALTER TABLE "stock_return_record" DROP CONSTRAINT "stock_return_record_order_id_orders_id_fk";--> statement-breakpoint
ALTER TABLE "benefit_grant" DROP CONSTRAINT "benefit_grant_pkey";--> statement-breakpoint
ALTER TABLE "benefit_grant" ADD CONSTRAINT "benefit_grant_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "benefit_reversal" DROP CONSTRAINT "benefit_reversal_pkey";--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD CONSTRAINT "benefit_reversal_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "coupon_redemption" DROP CONSTRAINT "coupon_redemption_pkey";--> statement-breakpoint
ALTER TABLE "coupon_redemption" ADD CONSTRAINT "coupon_redemption_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "message_consume_record" DROP CONSTRAINT "message_consume_record_pkey";--> statement-breakpoint
ALTER TABLE "message_consume_record" ADD CONSTRAINT "message_consume_record_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "order_item" DROP CONSTRAINT "order_item_pkey";--> statement-breakpoint
ALTER TABLE "order_item" ADD CONSTRAINT "order_item_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "orders" DROP CONSTRAINT "orders_pkey";--> statement-breakpoint
ALTER TABLE "orders" ADD CONSTRAINT "orders_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "outbox_event" DROP CONSTRAINT "outbox_event_pkey";--> statement-breakpoint
ALTER TABLE "outbox_event" ADD CONSTRAINT "outbox_event_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "payment_order" DROP CONSTRAINT "payment_order_pkey";--> statement-breakpoint
ALTER TABLE "payment_order" ADD CONSTRAINT "payment_order_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "refund_line" DROP CONSTRAINT "refund_line_pkey";--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "refund_order" DROP CONSTRAINT "refund_order_pkey";--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "shipment" DROP CONSTRAINT "shipment_pkey";--> statement-breakpoint
ALTER TABLE "shipment" ADD CONSTRAINT "shipment_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "stock_deduct_record" DROP CONSTRAINT "stock_deduct_record_pkey";--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ADD CONSTRAINT "stock_deduct_record_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "stock_return_record" DROP CONSTRAINT "stock_return_record_pkey";--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
ALTER TABLE "idempotency_record" DROP CONSTRAINT "idempotency_record_pkey";--> statement-breakpoint
ALTER TABLE "idempotency_record" ADD CONSTRAINT "idempotency_record_pkey" PRIMARY KEY("user_id","id");--> statement-breakpoint
DROP INDEX "benefit_reversal_refund_type_uq";--> statement-breakpoint
DROP INDEX "benefit_reversal_coupon_uq";--> statement-breakpoint
DROP INDEX "benefit_reversal_order_idx";--> statement-breakpoint
DROP INDEX "message_consume_record_event_consumer_uq";--> statement-breakpoint
DROP INDEX "order_item_order_id_sku_id_uq";--> statement-breakpoint
DROP INDEX "outbox_event_dedupe_key_uq";--> statement-breakpoint
DROP INDEX "payment_order_open_per_order_uq";--> statement-breakpoint
DROP INDEX "refund_line_refund_sku_uq";--> statement-breakpoint
DROP INDEX "refund_line_order_idx";--> statement-breakpoint
DROP INDEX "refund_order_order_idx";--> statement-breakpoint
DROP INDEX "shipment_order_uq";--> statement-breakpoint
DROP INDEX "stock_deduct_record_order_sku_uq";--> statement-breakpoint
DROP INDEX "stock_return_record_refund_sku_uq";--> statement-breakpoint
DROP INDEX "stock_return_record_order_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_grant_user_code_uq" ON "benefit_grant" USING btree ("user_id","code");--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_reversal_refund_type_uq" ON "benefit_reversal" USING btree ("user_id","refund_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_reversal_coupon_uq" ON "benefit_reversal" USING btree ("user_id","order_id") WHERE benefit_type = 'COUPON';--> statement-breakpoint
CREATE INDEX "benefit_reversal_order_idx" ON "benefit_reversal" USING btree ("user_id","order_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "message_consume_record_event_consumer_uq" ON "message_consume_record" USING btree ("user_id","event_id","consumer_name");--> statement-breakpoint
-- The timeout job's sweep reads only the orders still unpaid (it scanned the whole table).
CREATE INDEX "orders_awaiting_payment_idx" ON "orders" USING btree ("created_at") WHERE status = 'PENDING_PAYMENT';--> statement-breakpoint
CREATE UNIQUE INDEX "order_item_order_id_sku_id_uq" ON "order_item" USING btree ("user_id","order_id","sku_id");--> statement-breakpoint
CREATE UNIQUE INDEX "outbox_event_dedupe_key_uq" ON "outbox_event" USING btree ("user_id","dedupe_key");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_order_open_per_order_uq" ON "payment_order" USING btree ("user_id","order_id") WHERE status IN ('PENDING', 'SUCCESS');--> statement-breakpoint
CREATE UNIQUE INDEX "refund_line_refund_sku_uq" ON "refund_line" USING btree ("user_id","refund_id","sku_id");--> statement-breakpoint
CREATE INDEX "refund_line_order_idx" ON "refund_line" USING btree ("user_id","order_id");--> statement-breakpoint
CREATE INDEX "refund_order_order_idx" ON "refund_order" USING btree ("user_id","order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "shipment_order_uq" ON "shipment" USING btree ("user_id","order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "stock_deduct_record_order_sku_uq" ON "stock_deduct_record" USING btree ("user_id","order_id","sku_id");--> statement-breakpoint
CREATE UNIQUE INDEX "stock_return_record_refund_sku_uq" ON "stock_return_record" USING btree ("user_id","refund_id","sku_id");--> statement-breakpoint
CREATE INDEX "stock_return_record_order_idx" ON "stock_return_record" USING btree ("user_id","order_id","sku_id");--> statement-breakpoint
ALTER TABLE "benefit_grant" ADD CONSTRAINT "benefit_grant_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD CONSTRAINT "benefit_reversal_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD CONSTRAINT "benefit_reversal_refund_fk" FOREIGN KEY ("user_id","refund_id") REFERENCES "public"."refund_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "coupon_redemption" ADD CONSTRAINT "coupon_redemption_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "coupon_redemption" ADD CONSTRAINT "coupon_redemption_coupon_fk" FOREIGN KEY ("user_id","code") REFERENCES "public"."benefit_grant"("user_id","code") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_consume_record" ADD CONSTRAINT "message_consume_record_event_fk" FOREIGN KEY ("user_id","event_id") REFERENCES "public"."outbox_event"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "order_item" ADD CONSTRAINT "order_item_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "payment_order" ADD CONSTRAINT "payment_order_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_refund_fk" FOREIGN KEY ("user_id","refund_id") REFERENCES "public"."refund_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_payment_fk" FOREIGN KEY ("user_id","payment_id") REFERENCES "public"."payment_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "shipment" ADD CONSTRAINT "shipment_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ADD CONSTRAINT "stock_deduct_record_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_refund_fk" FOREIGN KEY ("user_id","refund_id") REFERENCES "public"."refund_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
DROP FUNCTION IF EXISTS idempotency_store_outcome(bigint, integer, text, json, text);--> statement-breakpoint
-- As in 0019, by the record's key (user_id, id). See docs/idempotency.md, rule 2.
CREATE FUNCTION idempotency_store_outcome(
  p_user_id text,
  p_record_id bigint,
  p_lease_version integer,
  p_status text,
  p_response_body json,
  p_biz_id text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE idempotency_record
     SET status = p_status, response_body = p_response_body, biz_id = p_biz_id,
         locked_until = NULL, updated_at = now()
   WHERE user_id = p_user_id AND id = p_record_id AND lease_version = p_lease_version AND status = 'PROCESSING';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idempotency lease lost (record %, lease version %)', p_record_id, p_lease_version
      USING ERRCODE = 'XO001';
  END IF;
END
$$;
