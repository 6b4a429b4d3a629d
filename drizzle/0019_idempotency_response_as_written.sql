-- The stored answer is kept as written (json, not jsonb, which reorders keys), so a replay answers the
-- first answer's bytes. Records stored before keep jsonb's order.
ALTER TABLE "idempotency_record" ALTER COLUMN "response_body" SET DATA TYPE json USING "response_body"::json;--> statement-breakpoint
DROP FUNCTION IF EXISTS idempotency_store_outcome(bigint, integer, text, jsonb, text);--> statement-breakpoint
-- As in 0006, taking the answer as json. See docs/idempotency.md, rule 2.
CREATE FUNCTION idempotency_store_outcome(
  p_record_id bigint,
  p_lease_version integer,
  p_status text,
  p_response_body json,
  p_biz_id text
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE idempotency_record
     SET status = p_status, response_body = p_response_body, biz_id = p_biz_id,
         locked_until = NULL, updated_at = now()
   WHERE id = p_record_id AND lease_version = p_lease_version AND status = 'PROCESSING';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idempotency lease lost (record %, lease version %)', p_record_id, p_lease_version
      USING ERRCODE = 'XO001';
  END IF;
END
$$;
