CREATE TABLE "provider_endpoint" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"app_id" text NOT NULL,
	"url" text NOT NULL,
	"format" text DEFAULT 'legacy' NOT NULL,
	"status" text DEFAULT 'ENABLED' NOT NULL,
	"disabled_reason" text,
	"paused_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_endpoint_format_valid" CHECK (format IN ('legacy', 'standard')),
	CONSTRAINT "provider_endpoint_status_valid" CHECK (status IN ('ENABLED', 'DISABLED'))
);
--> statement-breakpoint
CREATE TABLE "provider_endpoint_key" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"endpoint_id" uuid NOT NULL,
	"scheme" text NOT NULL,
	"secret" text NOT NULL,
	"public_key" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"retires_at" timestamp with time zone,
	CONSTRAINT "provider_endpoint_key_scheme_valid" CHECK (scheme IN ('v1', 'v1a'))
);
--> statement-breakpoint
ALTER TABLE "provider_endpoint_key" ADD CONSTRAINT "provider_endpoint_key_endpoint_id_provider_endpoint_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."provider_endpoint"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "provider_endpoint_app_url_uq" ON "provider_endpoint" USING btree ("app_id","url");--> statement-breakpoint
CREATE INDEX "provider_endpoint_key_endpoint_idx" ON "provider_endpoint_key" USING btree ("endpoint_id");