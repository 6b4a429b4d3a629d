CREATE UNIQUE INDEX "benefit_grant_code_uq" ON "benefit_grant" USING btree ("code");--> statement-breakpoint
CREATE TABLE "coupon_redemption" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "coupon_redemption_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"code" text NOT NULL,
	"user_id" text NOT NULL,
	"order_id" uuid NOT NULL,
	"discount_cents" integer NOT NULL,
	"status" text DEFAULT 'ACTIVE' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"released_at" timestamp with time zone,
	CONSTRAINT "coupon_redemption_discount_positive" CHECK ("coupon_redemption"."discount_cents" > 0),
	CONSTRAINT "coupon_redemption_status_valid" CHECK (status IN ('ACTIVE', 'RELEASED'))
);
--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "discount_cents" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "coupon_redemption" ADD CONSTRAINT "coupon_redemption_code_benefit_grant_code_fk" FOREIGN KEY ("code") REFERENCES "public"."benefit_grant"("code") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "coupon_redemption" ADD CONSTRAINT "coupon_redemption_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "coupon_redemption_active_code_uq" ON "coupon_redemption" USING btree ("code") WHERE status = 'ACTIVE';--> statement-breakpoint
CREATE UNIQUE INDEX "coupon_redemption_order_uq" ON "coupon_redemption" USING btree ("order_id");--> statement-breakpoint
ALTER TABLE "orders" ADD CONSTRAINT "orders_discount_non_negative" CHECK ("orders"."discount_cents" >= 0);