CREATE TABLE "return_receipt" (
	"id" bigint GENERATED ALWAYS AS IDENTITY (sequence name "return_receipt_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" text NOT NULL,
	"refund_id" uuid NOT NULL,
	"order_id" uuid NOT NULL,
	"sku_id" text NOT NULL,
	"quantity" integer NOT NULL,
	"receipt_key" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "return_receipt_pkey" PRIMARY KEY("user_id","id"),
	CONSTRAINT "return_receipt_quantity_positive" CHECK ("return_receipt"."quantity" > 0)
);
--> statement-breakpoint
CREATE TABLE "shipment_line" (
	"id" bigint GENERATED ALWAYS AS IDENTITY (sequence name "shipment_line_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"user_id" text NOT NULL,
	"order_id" uuid NOT NULL,
	"sku_id" text NOT NULL,
	"quantity" integer NOT NULL,
	CONSTRAINT "shipment_line_pkey" PRIMARY KEY("user_id","id"),
	CONSTRAINT "shipment_line_quantity_non_negative" CHECK ("shipment_line"."quantity" >= 0)
);
--> statement-breakpoint
ALTER TABLE "refund_order" DROP CONSTRAINT "refund_order_status_valid";--> statement-breakpoint
ALTER TABLE "return_receipt" ADD CONSTRAINT "return_receipt_sku_id_sku_id_fk" FOREIGN KEY ("sku_id") REFERENCES "public"."sku"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "return_receipt" ADD CONSTRAINT "return_receipt_refund_fk" FOREIGN KEY ("user_id","refund_id") REFERENCES "public"."refund_order"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "return_receipt" ADD CONSTRAINT "return_receipt_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "shipment_line" ADD CONSTRAINT "shipment_line_sku_id_sku_id_fk" FOREIGN KEY ("sku_id") REFERENCES "public"."sku"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "shipment_line" ADD CONSTRAINT "shipment_line_order_fk" FOREIGN KEY ("user_id","order_id") REFERENCES "public"."orders"("user_id","id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "return_receipt_refund_sku_uq" ON "return_receipt" USING btree ("user_id","refund_id","sku_id");--> statement-breakpoint
CREATE INDEX "return_receipt_order_idx" ON "return_receipt" USING btree ("user_id","order_id","sku_id");--> statement-breakpoint
CREATE UNIQUE INDEX "shipment_line_order_sku_uq" ON "shipment_line" USING btree ("user_id","order_id","sku_id");--> statement-breakpoint
ALTER TABLE "refund_order" ADD CONSTRAINT "refund_order_status_valid" CHECK (status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS', 'REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED'));--> statement-breakpoint
-- What each existing shipment carried: what its order held when it shipped (deducted, less what came back before).
INSERT INTO "shipment_line" (user_id, order_id, sku_id, quantity)
SELECT d.user_id, d.order_id, d.sku_id,
       d.quantity - coalesce((SELECT sum(r.quantity) FROM stock_return_record r
                               WHERE r.user_id = d.user_id AND r.order_id = d.order_id AND r.sku_id = d.sku_id
                                 AND r.created_at <= s.created_at), 0)
  FROM stock_deduct_record d JOIN shipment s ON s.user_id = d.user_id AND s.order_id = d.order_id;--> statement-breakpoint
-- Stock given back after a shipment, before returns existed, was taken for goods received back: so recorded.
INSERT INTO "return_receipt" (user_id, refund_id, order_id, sku_id, quantity, receipt_key, created_at)
SELECT r.user_id, r.refund_id, r.order_id, r.sku_id, r.quantity, 'before-returns', r.created_at
  FROM stock_return_record r JOIN shipment s ON s.user_id = r.user_id AND s.order_id = r.order_id
 WHERE r.created_at > s.created_at;
