CREATE TABLE "duplicate_attempt" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "duplicate_attempt_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"layer" text NOT NULL,
	"scope" text NOT NULL,
	"subject" text NOT NULL,
	"key" text NOT NULL,
	"outcome" text NOT NULL,
	"second" timestamp with time zone NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "duplicate_attempt_layer_valid" CHECK (layer IN ('gateway', 'service', 'consumer'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX "duplicate_attempt_uq" ON "duplicate_attempt" USING btree ("scope","key","layer","subject","outcome","second");--> statement-breakpoint
CREATE INDEX "duplicate_attempt_second_idx" ON "duplicate_attempt" USING btree ("second");