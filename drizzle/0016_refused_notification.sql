CREATE TABLE "refused_notification" (
	"minute" timestamp with time zone NOT NULL,
	"reason" text NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "refused_notification_minute_reason_pk" PRIMARY KEY("minute","reason"),
	CONSTRAINT "refused_notification_reason_valid" CHECK (reason IN ('BAD_SIGNATURE', 'STALE_TIMESTAMP', 'UNSIGNED'))
);
--> statement-breakpoint
-- Notifications that failed verification leave the payment timeline: counted per minute and reason, then removed.
INSERT INTO "refused_notification" ("minute", "reason", "count")
SELECT date_trunc('minute', received_at),
       CASE WHEN outcome = 'MALFORMED' THEN 'UNSIGNED' ELSE outcome END,
       count(*)::int
  FROM "payment_notification"
 WHERE (outcome IN ('BAD_SIGNATURE', 'STALE_TIMESTAMP') OR (outcome = 'MALFORMED' AND http_status = 401))
   AND received_at > now() - interval '1 day'
 GROUP BY 1, 2;--> statement-breakpoint
DELETE FROM "payment_notification"
 WHERE outcome IN ('BAD_SIGNATURE', 'STALE_TIMESTAMP') OR (outcome = 'MALFORMED' AND http_status = 401);--> statement-breakpoint
ALTER TABLE "payment_notification" DROP CONSTRAINT "payment_notification_outcome_valid";--> statement-breakpoint
ALTER TABLE "payment_notification" ADD CONSTRAINT "payment_notification_outcome_valid" CHECK (outcome IN ('PROCESSED', 'DUPLICATE', 'IGNORED', 'WRONG_APP', 'MALFORMED', 'UNKNOWN_PAYMENT', 'AMOUNT_MISMATCH', 'TRANSACTION_CLASH', 'ERROR'));