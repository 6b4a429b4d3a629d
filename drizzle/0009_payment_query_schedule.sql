ALTER TABLE "payment_order" ADD COLUMN "query_attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "payment_order" ADD COLUMN "next_query_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "payment_order_query_schedule_idx" ON "payment_order" USING btree ("query_attempts","next_query_at") WHERE status = 'PENDING';