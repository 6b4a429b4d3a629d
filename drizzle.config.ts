import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: ["./src/server/db/schema/*.ts", "./src/mockpay/server/schema.ts"],
  out: "./drizzle",
  casing: "snake_case",
});
