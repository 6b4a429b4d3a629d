ALTER TABLE "refund_order" ADD COLUMN "send_claim" uuid;--> statement-breakpoint
ALTER TABLE "refund_order" ADD COLUMN "send_until" timestamp with time zone;