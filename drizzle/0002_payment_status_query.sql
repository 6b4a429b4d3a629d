ALTER TABLE "payment_order" ADD COLUMN "last_queried_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "payment_notification_alert_idx" ON "payment_notification" USING btree ("received_at") WHERE alert;--> statement-breakpoint
CREATE INDEX "payment_order_pending_idx" ON "payment_order" USING btree ("created_at") WHERE status = 'PENDING';