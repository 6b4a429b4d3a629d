CREATE TABLE "refund_line" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "refund_line_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"refund_id" uuid NOT NULL,
	"order_id" uuid NOT NULL,
	"sku_id" text NOT NULL,
	"quantity" integer NOT NULL,
	CONSTRAINT "refund_line_quantity_positive" CHECK ("refund_line"."quantity" > 0)
);
--> statement-breakpoint
DROP INDEX "benefit_reversal_order_type_uq";--> statement-breakpoint
DROP INDEX "stock_return_record_order_sku_uq";--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_refund_id_refund_order_id_fk" FOREIGN KEY ("refund_id") REFERENCES "public"."refund_order"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "refund_line" ADD CONSTRAINT "refund_line_sku_id_sku_id_fk" FOREIGN KEY ("sku_id") REFERENCES "public"."sku"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "refund_line_refund_sku_uq" ON "refund_line" USING btree ("refund_id","sku_id");--> statement-breakpoint
CREATE INDEX "refund_line_order_idx" ON "refund_line" USING btree ("order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_reversal_refund_type_uq" ON "benefit_reversal" USING btree ("refund_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "benefit_reversal_coupon_uq" ON "benefit_reversal" USING btree ("order_id") WHERE benefit_type = 'COUPON';--> statement-breakpoint
CREATE INDEX "benefit_reversal_order_idx" ON "benefit_reversal" USING btree ("order_id","benefit_type");--> statement-breakpoint
CREATE INDEX "stock_return_record_order_idx" ON "stock_return_record" USING btree ("order_id","sku_id");--> statement-breakpoint
ALTER TABLE "stock_return_record" ADD CONSTRAINT "stock_return_record_quantity_positive" CHECK ("stock_return_record"."quantity" > 0);