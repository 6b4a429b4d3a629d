-- Refund numbers become the shopper's own (unique per shopper); the provider knows each refund by a number
-- the merchant makes. Refunds made before keep the number the provider already has.
ALTER TABLE "refund_order" ADD COLUMN "user_id" text;--> statement-breakpoint
ALTER TABLE "refund_order" ADD COLUMN "provider_refund_no" text;--> statement-breakpoint
UPDATE "refund_order" r SET "user_id" = o."user_id", "provider_refund_no" = r."refund_no" FROM "orders" o WHERE o."id" = r."order_id";--> statement-breakpoint
ALTER TABLE "refund_order" ALTER COLUMN "user_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "refund_order" ALTER COLUMN "provider_refund_no" SET NOT NULL;--> statement-breakpoint
DROP INDEX "refund_order_refund_no_uq";--> statement-breakpoint
CREATE UNIQUE INDEX "refund_order_user_refund_no_uq" ON "refund_order" USING btree ("user_id","refund_no");--> statement-breakpoint
CREATE UNIQUE INDEX "refund_order_provider_refund_no_uq" ON "refund_order" USING btree ("provider_refund_no");
