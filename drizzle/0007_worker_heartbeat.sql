CREATE TABLE "worker_heartbeat" (
	"worker_id" text PRIMARY KEY NOT NULL,
	"process" text NOT NULL,
	"beat_at" timestamp with time zone DEFAULT now() NOT NULL
);
