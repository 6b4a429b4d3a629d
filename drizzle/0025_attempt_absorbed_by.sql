DROP INDEX "duplicate_attempt_uq";--> statement-breakpoint
ALTER TABLE "duplicate_attempt" ADD COLUMN "absorbed_by" text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "duplicate_attempt_uq" ON "duplicate_attempt" USING btree ("scope","key","layer","subject","outcome","absorbed_by","second");