CREATE TABLE "reconciliation_report" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "reconciliation_report_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"slot" bigint NOT NULL,
	"claimed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"checked_at" timestamp with time zone,
	"took_ms" integer,
	"ok" boolean,
	"invariants" jsonb
);
--> statement-breakpoint
CREATE UNIQUE INDEX "reconciliation_report_slot_uq" ON "reconciliation_report" USING btree ("slot");--> statement-breakpoint
CREATE INDEX "reconciliation_report_checked_at_idx" ON "reconciliation_report" USING btree ("checked_at");