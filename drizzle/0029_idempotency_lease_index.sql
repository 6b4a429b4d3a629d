DROP INDEX "idempotency_record_processing_idx";--> statement-breakpoint
CREATE INDEX "idempotency_record_lease_idx" ON "idempotency_record" USING btree ("locked_until") WHERE locked_until IS NOT NULL;