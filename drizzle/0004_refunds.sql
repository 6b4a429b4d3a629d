CREATE TABLE "benefit_reversal" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "benefit_reversal_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"order_id" uuid NOT NULL,
	"refund_id" uuid NOT NULL,
	"benefit_type" text NOT NULL,
	"amount" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "provider_refund" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"trade_id" uuid NOT NULL,
	"refund_no" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"status" text DEFAULT 'SUCCEEDED' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "refund_order" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"refund_no" text NOT NULL,
	"order_id" uuid NOT NULL,
	"payment_id" uuid NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text DEFAULT 'REFUND_CREATED' NOT NULL,
	"reason" text DEFAULT '' NOT NULL,
	"failure_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "refund_order_amount_positive" CHECK ("refund_order"."amount_cents" > 0),
	CONSTRAINT "refund_order_status_valid" CHECK (status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS', 'REFUND_FAILED'))
);
--> statement-breakpoint
CREATE TABLE "stock_return_record" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "stock_return_record_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"refund_id" uuid NOT NULL,
	"order_id" uuid NOT NULL,
	"sku_id" text NOT NULL,
	"quantity" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
DROP INDEX "provider_notification_trade_type_uq";--> statement-breakpoint
ALTER TABLE "provider_notification" ADD COLUMN "fact_key" text;--> statement-breakpoint
UPDATE "provider_notification" SET "fact_key" = "type";--> statement-breakpoint
ALTER TABLE "provider_notification" ALTER COLUMN "fact_key" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD CONSTRAINT "benefit_reversal_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "benefit_reversal" ADD CONSTRAINT "benefit_reversal_refund_id_refund_order_id_fk" FOREIGN KEY ("refund_id") REFERENCES "public"."refund_order"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "provider_refund" ADD CONSTRAINT "provider_refund_trade_id_provider_trade_id_fk" FOREIGN KEY ("trade_id") REFERENCES "public"."provider_trade"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_payment_id_payment_order_id_fk" FOREIGN KEY ("payment_id") REFERENCES "public"."payment_order"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_refund_id_refund_order_id_fk" FOREIGN KEY ("refund_id") REFERENCES "public"."refund_order"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_sku_id_sku_id_fk" FOREIGN KEY ("sku_id") REFERENCES "public"."sku"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_reversal_order_type_uq" ON "benefit_reversal" USING btree ("order_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "provider_refund_trade_refund_no_uq" ON "provider_refund" USING btree ("trade_id","refund_no");--> statement-breakpoint
CREATE UNIQUE INDEX "refund_order_refund_no_uq" ON "refund_order" USING btree ("refund_no");--> statement-breakpoint
CREATE INDEX "refund_order_order_idx" ON "refund_order" USING btree ("order_id");--> statement-breakpoint
CREATE INDEX "refund_order_created_idx" ON "refund_order" USING btree ("created_at") WHERE status = 'REFUND_CREATED';--> statement-breakpoint
CREATE UNIQUE INDEX "stock_return_record_refund_sku_uq" ON "stock_return_record" USING btree ("refund_id","sku_id");--> statement-breakpoint
CREATE UNIQUE INDEX "stock_return_record_order_sku_uq" ON "stock_return_record" USING btree ("order_id","sku_id");--> statement-breakpoint
CREATE UNIQUE INDEX "provider_notification_trade_fact_uq" ON "provider_notification" USING btree ("trade_id","fact_key");