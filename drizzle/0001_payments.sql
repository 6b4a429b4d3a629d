CREATE TABLE "outbox_event" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"event_type" text NOT NULL,
	"aggregate_type" text NOT NULL,
	"aggregate_id" text NOT NULL,
	"dedupe_key" text NOT NULL,
	"payload" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"published_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "payment_notification" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "payment_notification_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"notification_id" text,
	"delivery_id" text,
	"out_trade_no" text,
	"type" text,
	"outcome" text NOT NULL,
	"detail" text DEFAULT '' NOT NULL,
	"alert" boolean DEFAULT false NOT NULL,
	"http_status" integer NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "payment_notification_outcome_valid" CHECK (outcome IN ('PROCESSED', 'DUPLICATE', 'IGNORED', 'BAD_SIGNATURE', 'STALE_TIMESTAMP', 'WRONG_APP', 'MALFORMED', 'UNKNOWN_PAYMENT', 'AMOUNT_MISMATCH', 'ERROR'))
);
--> statement-breakpoint
CREATE TABLE "payment_order" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"order_id" uuid NOT NULL,
	"out_trade_no" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text DEFAULT 'PENDING' NOT NULL,
	"transaction_id" text,
	"paid_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "payment_order_status_valid" CHECK (status IN ('PENDING', 'SUCCESS', 'CLOSED', 'FAILED')),
	CONSTRAINT "payment_order_amount_positive" CHECK ("payment_order"."amount_cents" > 0)
);
--> statement-breakpoint
CREATE TABLE "provider_delivery_attempt" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"notification_id" text NOT NULL,
	"attempt_no" integer NOT NULL,
	"kind" text NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"latency_ms" integer NOT NULL,
	"http_status" integer,
	"response_body" text,
	"error" text,
	"ok" boolean NOT NULL
);
--> statement-breakpoint
CREATE TABLE "provider_notification" (
	"id" text PRIMARY KEY NOT NULL,
	"trade_id" uuid NOT NULL,
	"type" text NOT NULL,
	"body" jsonb NOT NULL,
	"status" text DEFAULT 'PENDING' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"delivered_at" timestamp with time zone,
	CONSTRAINT "provider_notification_status_valid" CHECK (status IN ('PENDING', 'DELIVERED', 'GAVE_UP'))
);
--> statement-breakpoint
CREATE TABLE "provider_trade" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"app_id" text NOT NULL,
	"out_trade_no" text NOT NULL,
	"amount_cents" bigint NOT NULL,
	"currency" text NOT NULL,
	"notify_url" text NOT NULL,
	"return_url" text NOT NULL,
	"status" text DEFAULT 'WAITING' NOT NULL,
	"transaction_id" text,
	"paid_at" timestamp with time zone,
	"drop_notifications" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_trade_status_valid" CHECK (status IN ('WAITING', 'PAID', 'CLOSED'))
);
--> statement-breakpoint
ALTER TABLE "payment_order" ADD CONSTRAINT "payment_order_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "provider_delivery_attempt" ADD CONSTRAINT "provider_delivery_attempt_notification_id_provider_notification_id_fk" FOREIGN KEY ("notification_id") REFERENCES "public"."provider_notification"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "provider_notification" ADD CONSTRAINT "provider_notification_trade_id_provider_trade_id_fk" FOREIGN KEY ("trade_id") REFERENCES "public"."provider_trade"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "outbox_event_dedupe_key_uq" ON "outbox_event" USING btree ("dedupe_key");--> statement-breakpoint
CREATE INDEX "outbox_event_unpublished_idx" ON "outbox_event" USING btree ("created_at") WHERE published_at IS NULL;--> statement-breakpoint
CREATE INDEX "payment_notification_out_trade_no_idx" ON "payment_notification" USING btree ("out_trade_no","received_at");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_order_out_trade_no_uq" ON "payment_order" USING btree ("out_trade_no");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_order_transaction_id_uq" ON "payment_order" USING btree ("transaction_id");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_order_open_per_order_uq" ON "payment_order" USING btree ("order_id") WHERE status IN ('PENDING', 'SUCCESS');--> statement-breakpoint
CREATE INDEX "provider_delivery_attempt_notification_idx" ON "provider_delivery_attempt" USING btree ("notification_id","started_at");--> statement-breakpoint
CREATE UNIQUE INDEX "provider_notification_trade_type_uq" ON "provider_notification" USING btree ("trade_id","type");--> statement-breakpoint
CREATE INDEX "provider_notification_due_idx" ON "provider_notification" USING btree ("next_attempt_at") WHERE status = 'PENDING';--> statement-breakpoint
CREATE UNIQUE INDEX "provider_trade_app_out_trade_no_uq" ON "provider_trade" USING btree ("app_id","out_trade_no");--> statement-breakpoint
CREATE UNIQUE INDEX "provider_trade_transaction_id_uq" ON "provider_trade" USING btree ("transaction_id");