CREATE TABLE "benefit_grant" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "benefit_grant_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"order_id" uuid NOT NULL,
	"user_id" text NOT NULL,
	"benefit_type" text NOT NULL,
	"amount" integer NOT NULL,
	"code" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "benefit_grant_type_valid" CHECK (benefit_type IN ('LOYALTY_POINTS', 'COUPON'))
);
--> statement-breakpoint
CREATE TABLE "message_consume_record" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "message_consume_record_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"event_id" uuid NOT NULL,
	"consumer_name" text NOT NULL,
	"status" text DEFAULT 'PROCESSING' NOT NULL,
	"result" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"done_at" timestamp with time zone,
	CONSTRAINT "message_consume_record_status_valid" CHECK (status IN ('PROCESSING', 'DONE'))
);
--> statement-breakpoint
CREATE TABLE "shipment" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"order_id" uuid NOT NULL,
	"tracking_no" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stock_deduct_record" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "stock_deduct_record_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"order_id" uuid NOT NULL,
	"sku_id" text NOT NULL,
	"quantity" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "stock_deduct_record_quantity_positive" CHECK ("stock_deduct_record"."quantity" > 0)
);
--> statement-breakpoint
ALTER TABLE "orders" DROP CONSTRAINT "orders_status_valid";--> statement-breakpoint
ALTER TABLE "sku" ADD COLUMN "initial_stock" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "benefit_grant" ADD CONSTRAINT "benefit_grant_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_consume_record" ADD CONSTRAINT "message_consume_record_event_id_outbox_event_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."outbox_event"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "shipment" ADD CONSTRAINT "shipment_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ADD CONSTRAINT "stock_deduct_record_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stock_deduct_record" ADD CONSTRAINT "stock_deduct_record_sku_id_sku_id_fk" FOREIGN KEY ("sku_id") REFERENCES "public"."sku"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_grant_order_type_uq" ON "benefit_grant" USING btree ("order_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "message_consume_record_event_consumer_uq" ON "message_consume_record" USING btree ("event_id","consumer_name");--> statement-breakpoint
CREATE UNIQUE INDEX "shipment_order_uq" ON "shipment" USING btree ("order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "stock_deduct_record_order_sku_uq" ON "stock_deduct_record" USING btree ("order_id","sku_id");--> statement-breakpoint
ALTER TABLE "orders" ADD CONSTRAINT "orders_status_valid" CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'SHIPPED', 'STOCK_SHORT', 'CLOSED', 'REFUNDED'));--> statement-breakpoint
UPDATE "sku" SET "initial_stock" = "stock";
