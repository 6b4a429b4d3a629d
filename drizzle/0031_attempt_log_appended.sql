DROP INDEX "duplicate_attempt_uq";--> statement-breakpoint
DROP INDEX "duplicate_attempt_second_idx";--> statement-breakpoint
CREATE INDEX "duplicate_attempt_scope_second_idx" ON "duplicate_attempt" USING btree ("scope","second");--> statement-breakpoint
CREATE INDEX "duplicate_attempt_second_brin" ON "duplicate_attempt" USING brin ("second");--> statement-breakpoint
ALTER TABLE "duplicate_attempt" DROP COLUMN "id";--> statement-breakpoint
-- A consumer's attempts were counted under scope "": they are the event's shopper's now (the story finds them by shopper and time).
UPDATE "duplicate_attempt" a SET "scope" = e."user_id" FROM "outbox_event" e WHERE a."layer" = 'consumer' AND a."scope" = '' AND a."key" = e."id"::text;
