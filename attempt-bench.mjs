import postgres from "postgres";
import { randomUUID } from "node:crypto";
const sql = postgres("postgres://postgres@127.0.0.1:5432/probe", { max: 1, onnotice: () => {} });
await sql.unsafe(`DROP TABLE IF EXISTS da_a, da_b, da_c;
CREATE TABLE da_a (id bigint generated always as identity primary key, layer text not null, scope text not null, subject text not null, key text not null, outcome text not null, absorbed_by text not null default '', second timestamptz not null, count int not null);
CREATE UNIQUE INDEX da_a_uq ON da_a (scope, key, layer, subject, outcome, absorbed_by, second); CREATE INDEX da_a_s ON da_a (second);
CREATE TABLE da_b (LIKE da_a INCLUDING DEFAULTS INCLUDING IDENTITY); ALTER TABLE da_b ADD PRIMARY KEY (id);
CREATE INDEX da_b_k ON da_b (scope, key); CREATE INDEX da_b_s ON da_b USING brin (second);
CREATE TABLE da_c (LIKE da_a INCLUDING DEFAULTS); ALTER TABLE da_c DROP COLUMN id; 
CREATE INDEX da_c_k ON da_c (scope, key); CREATE INDEX da_c_s ON da_c USING brin (second);`);
const scope = randomUUID();
const rows = (n, sec) => Array.from({ length: n }, () => ({ layer: "service", scope, subject: "order.create", key: randomUUID(), outcome: "replayed", absorbed: "the replay cache", second: sec, count: 1 }));
const col = (r, k) => r.map((x) => x[k]);
async function ins(table, r, upsert) {
  const t = performance.now();
  await sql.unsafe(`INSERT INTO ${table} (layer, scope, subject, key, outcome, absorbed_by, second, count)
    SELECT layer, scope, subject, key, outcome, absorbed_by, to_timestamp(second), count FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::int[]) AS t(layer, scope, subject, key, outcome, absorbed_by, second, count)
    ${upsert ? "ON CONFLICT (scope, key, layer, subject, outcome, absorbed_by, second) DO UPDATE SET count = " + table + ".count + excluded.count" : ""}`,
    [col(r,"layer"), col(r,"scope"), col(r,"subject"), col(r,"key"), col(r,"outcome"), col(r,"absorbed"), col(r,"second"), col(r,"count")]);
  return performance.now() - t;
}
const tot = { a: 0, b: 0, c: 0 };
for (let i = 0; i < 60; i++) {
  const sec = 1_800_000_000 + i;
  tot.a += await ins("da_a", rows(3000, sec), true);
  tot.b += await ins("da_b", rows(3000, sec), false);
  tot.c += await ins("da_c", rows(3000, sec), false);
}
console.log(Object.fromEntries(Object.entries(tot).map(([k, v]) => [k, (v / 60 / 3000 * 1000).toFixed(2) + " us/row"])));

const sql2 = postgres("postgres://postgres@127.0.0.1:5432/probe", { max: 1, onnotice: () => {} });
async function copy(table, r) {
  const t = performance.now();
  const w = await sql2.unsafe(`COPY ${table} (layer, scope, subject, key, outcome, absorbed_by, second, count) FROM STDIN`).writable();
  const text = r.map((x) => `${x.layer}\t${x.scope}\t${x.subject}\t${x.key}\t${x.outcome}\t${x.absorbed}\t${new Date(x.second*1000).toISOString()}\t${x.count}\n`).join("");
  await new Promise((res, rej) => { w.on("finish", res); w.on("error", rej); w.end(text); });
  return performance.now() - t;
}
const t2 = { b: 0, c: 0, bi: 0 };
for (let i = 0; i < 60; i++) {
  const sec = 1_900_000_000 + i;
  t2.b += await copy("da_b", rows(3000, sec));
  t2.c += await copy("da_c", rows(3000, sec));
}
console.log("copy", Object.fromEntries(Object.entries(t2).map(([k, v]) => [k, (v / 60 / 3000 * 1000).toFixed(2) + " us/row"])));
await sql2.end();
