import { RECORD, RECORD_STATUSES } from "./machine";

/**
 * The record table and its fenced store function, for an app that mounts the core on a database of its own
 * (examples/plain-node). This app's table is made by its migrations (drizzle/, `idempotency_record` and
 * `idempotency_store_outcome`); test/idempotency-core.test.ts checks that the two agree column by column.
 *
 * The key is (user_id, biz_type, idempotency_key): a scope (the caller), the operation, the client's key.
 * `response_body` is `json`, not `jsonb`, so a replay answers the first answer's bytes.
 */
export function recordSchema(names: { table: string; storeOutcome: string }): string {
  const table = identifier(names.table);
  const fn = identifier(names.storeOutcome);
  const statuses = RECORD_STATUSES.map((s) => `'${s}'`).join(", ");
  return `
CREATE TABLE IF NOT EXISTS ${table} (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  user_id text NOT NULL,
  biz_type text NOT NULL,
  idempotency_key text NOT NULL,
  fingerprint text NOT NULL,
  status text DEFAULT '${RECORD.claim.to}' NOT NULL CHECK (status IN (${statuses})),
  biz_id text,
  response_body json,
  answer_version integer DEFAULT 1 NOT NULL,
  lease_version integer DEFAULT 1 NOT NULL,
  locked_until timestamp with time zone,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  expires_at timestamp with time zone NOT NULL,
  PRIMARY KEY (user_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS ${identifier(`${names.table}_key_uq`)} ON ${table} (user_id, biz_type, idempotency_key);
CREATE INDEX IF NOT EXISTS ${identifier(`${names.table}_expires_at_idx`)} ON ${table} (expires_at);
-- The leases being held (few at a time), for whoever looks for leases that ran out. It names no status, and a
-- one-transaction claim holds no lease, so that claim's outcome is a HOT update (no new index entries).
CREATE INDEX IF NOT EXISTS ${identifier(`${names.table}_lease_idx`)} ON ${table} (locked_until) WHERE locked_until IS NOT NULL;

CREATE OR REPLACE FUNCTION ${fn}(
  p_user_id text, p_record_id bigint, p_lease_version integer, p_status text, p_response_body json, p_biz_id text
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ${table}
     SET status = p_status, response_body = p_response_body, biz_id = p_biz_id,
         locked_until = NULL, updated_at = now()
   WHERE user_id = p_user_id AND id = p_record_id AND lease_version = p_lease_version
     AND status = '${RECORD.succeed.from[0]}';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'idempotency lease lost (record %, lease version %)', p_record_id, p_lease_version
      USING ERRCODE = 'XO001';
  END IF;
END
$$;`;
}

function identifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain lower-case SQL name: ${name}`);
  return `"${name}"`;
}
