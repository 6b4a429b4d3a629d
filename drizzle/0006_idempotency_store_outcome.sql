-- Custom SQL migration file, put your code below! --
-- Stores the outcome of an idempotent operation under its lease, and FAILS when the lease was lost
-- (taken over by another request): the business transaction then rolls back, even when the COMMIT
-- was sent in the same round trip as this call. See docs/idempotency.md, rule 2.
CREATE OR REPLACE FUNCTION idempotency_store_outcome(
  p_record_id bigint,
  p_lease_version integer,
  p_status text,
  p_response_body jsonb,
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
