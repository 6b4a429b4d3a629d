CREATE TABLE "api_token_revocation" (
	"user_id" text PRIMARY KEY NOT NULL,
	"revoked_before" timestamp with time zone NOT NULL
);
