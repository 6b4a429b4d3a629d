CREATE TABLE "ledger_transfer" (
	"id" bigint GENERATED ALWAYS AS IDENTITY (sequence name "ledger_transfer_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" text NOT NULL,
	"order_id" uuid NOT NULL,
	"payment_id" uuid NOT NULL,
	"refund_id" uuid,
	"fact_key" text NOT NULL,
	"from_account" text NOT NULL,
	"to_account" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ledger_transfer_pkey" PRIMARY KEY("user_id","id"),
	CONSTRAINT "ledger_transfer_amount_positive" CHECK ("ledger_transfer"."amount_cents" > 0),
	CONSTRAINT "ledger_transfer_two_accounts" CHECK ("ledger_transfer"."from_account" <> "ledger_transfer"."to_account"),
	CONSTRAINT "ledger_transfer_from_valid" CHECK (from_account IN ('shopper', 'revenue', 'refunds_payable')),
	CONSTRAINT "ledger_transfer_to_valid" CHECK (to_account IN ('shopper', 'revenue', 'refunds_payable'))
);
--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "request_fingerprint" text;--> statement-breakpoint
-- Orders placed before keep the fingerprint their request had: sha256 of 'order.create', a newline and the
-- canonical JSON of {couponCode?, items: [{quantity, skuId}] in SKU order} (src/server/idempotency/fingerprint.ts).
UPDATE "orders" o SET "request_fingerprint" = encode(sha256(convert_to(
  'order.create' || E'\n' || '{'
  || coalesce((SELECT '"couponCode":' || to_json(c.code)::text || ',' FROM coupon_redemption c
                WHERE c.user_id = o.user_id AND c.order_id = o.id), '')
  || '"items":[' || coalesce((SELECT string_agg('{"quantity":' || i.quantity || ',"skuId":' || to_json(i.sku_id)::text || '}', ','
                                                ORDER BY i.sku_id COLLATE "C")
                                FROM order_item i WHERE i.user_id = o.user_id AND i.order_id = o.id), '')
  || ']}', 'UTF8')), 'hex');--> statement-breakpoint
ALTER TABLE "orders" ALTER COLUMN "request_fingerprint" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "refund_order" ADD COLUMN "attempt" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "refund_order" ADD COLUMN "provider_attempt" integer;--> statement-breakpoint
ALTER TABLE "provider_refund" ADD COLUMN "attempts" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE "provider_refund" ADD COLUMN "updated_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "provider_trade" ADD COLUMN "fail_refunds" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "provider_trade" ADD COLUMN "silent_refunds" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "ledger_transfer" ADD CONSTRAINT "ledger_transfer_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_transfer" ADD CONSTRAINT "ledger_transfer_payment_fk" FOREIGN KEY ("user_id","payment_id") REFERENCES "public"."payment_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_transfer" ADD CONSTRAINT "ledger_transfer_refund_fk" FOREIGN KEY ("user_id","refund_id") REFERENCES "public"."refund_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "ledger_transfer_fact_uq" ON "ledger_transfer" USING btree ("user_id","fact_key");--> statement-breakpoint
CREATE INDEX "ledger_transfer_payment_idx" ON "ledger_transfer" USING btree ("user_id","payment_id");--> statement-breakpoint
CREATE INDEX "ledger_transfer_order_idx" ON "ledger_transfer" USING btree ("user_id","order_id");--> statement-breakpoint
ALTER TABLE "provider_refund" ADD CONSTRAINT "provider_refund_status_valid" CHECK (status IN ('SUCCEEDED', 'FAILED'));--> statement-breakpoint
-- The ledger's opening entries: what the state tables say has moved, under the keys the code posts them with.
INSERT INTO "ledger_transfer" (user_id, order_id, payment_id, fact_key, from_account, to_account, amount_cents, currency, created_at)
SELECT user_id, order_id, id, 'capture:' || transaction_id, 'shopper', 'revenue', amount_cents, currency, coalesce(paid_at, updated_at)
  FROM payment_order WHERE status IN ('SUCCESS', 'PAID_LATE') AND transaction_id IS NOT NULL;--> statement-breakpoint
INSERT INTO "ledger_transfer" (user_id, order_id, payment_id, refund_id, fact_key, from_account, to_account, amount_cents, currency, created_at)
SELECT user_id, order_id, payment_id, id, 'refund:' || provider_refund_no || ':1:owed', 'revenue', 'refunds_payable', amount_cents, currency, created_at
  FROM refund_order WHERE status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS');--> statement-breakpoint
INSERT INTO "ledger_transfer" (user_id, order_id, payment_id, refund_id, fact_key, from_account, to_account, amount_cents, currency, created_at)
SELECT user_id, order_id, payment_id, id, 'refund:' || provider_refund_no || ':paid', 'refunds_payable', 'shopper', amount_cents, currency, updated_at
  FROM refund_order WHERE status = 'REFUND_SUCCESS';