CREATE TABLE "order_touch" (
	"at" timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
	"user_id" text NOT NULL,
	"order_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE TABLE "reconciliation_request" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"requested_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "reconciliation_request_one" CHECK ("reconciliation_request"."id" = 1)
);
--> statement-breakpoint
DROP INDEX "reconciliation_report_slot_uq";--> statement-breakpoint
ALTER TABLE "reconciliation_report" ADD COLUMN "kind" text DEFAULT 'full' NOT NULL;--> statement-breakpoint
ALTER TABLE "reconciliation_report" ADD COLUMN "orders_checked" integer;--> statement-breakpoint
ALTER TABLE "reconciliation_report" ADD COLUMN "open_orders" jsonb;--> statement-breakpoint
CREATE INDEX "order_touch_at_brin" ON "order_touch" USING brin ("at");--> statement-breakpoint
CREATE INDEX "outbox_event_aggregate_idx" ON "outbox_event" USING btree ("user_id","aggregate_id");--> statement-breakpoint
CREATE INDEX "payment_order_order_idx" ON "payment_order" USING btree ("user_id","order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "reconciliation_report_kind_slot_uq" ON "reconciliation_report" USING btree ("kind","slot");--> statement-breakpoint
CREATE INDEX "provider_refund_updated_at_idx" ON "provider_refund" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "provider_trade_updated_at_idx" ON "provider_trade" USING btree ("updated_at");--> statement-breakpoint
ALTER TABLE "reconciliation_report" ADD CONSTRAINT "reconciliation_report_kind_valid" CHECK (kind IN ('incremental', 'full', 'requested'));--> statement-breakpoint
-- Every statement that writes a table moving money or goods appends the orders it wrote to order_touch, in the
-- same statement: an incremental reconciliation checks those orders (src/server/reconciliation/scope.ts). One
-- trigger per table and event, for each statement (a transition table holds the rows it wrote).
CREATE FUNCTION "order_touched_by_order_id"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO order_touch (user_id, order_id) SELECT DISTINCT user_id, order_id FROM changed;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "order_touched_by_id"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO order_touch (user_id, order_id) SELECT DISTINCT user_id, id FROM changed;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "order_touched_by_event"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO order_touch (user_id, order_id)
  SELECT DISTINCT e.user_id, e.aggregate_id::uuid FROM changed c
    JOIN outbox_event e ON e.user_id = c.user_id AND e.id = c.event_id
   WHERE e.aggregate_type = 'order';
  RETURN NULL;
END $$;--> statement-breakpoint
DO $$
DECLARE
  tbl text;
  fn text;
BEGIN
  FOR tbl, fn IN VALUES
    ('orders', 'order_touched_by_id'),
    ('order_item', 'order_touched_by_order_id'),
    ('payment_order', 'order_touched_by_order_id'),
    ('refund_order', 'order_touched_by_order_id'),
    ('refund_line', 'order_touched_by_order_id'),
    ('stock_deduct_record', 'order_touched_by_order_id'),
    ('stock_return_record', 'order_touched_by_order_id'),
    ('shipment', 'order_touched_by_order_id'),
    ('shipment_line', 'order_touched_by_order_id'),
    ('return_receipt', 'order_touched_by_order_id'),
    ('benefit_grant', 'order_touched_by_order_id'),
    ('benefit_reversal', 'order_touched_by_order_id'),
    ('coupon_redemption', 'order_touched_by_order_id'),
    ('ledger_transfer', 'order_touched_by_order_id'),
    ('message_consume_record', 'order_touched_by_event')
  LOOP
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION %I()', tbl || '_touch_insert', tbl, fn);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION %I()', tbl || '_touch_update', tbl, fn);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION %I()', tbl || '_touch_delete', tbl, fn);
  END LOOP;
END $$;
