/** The merchant's tables (MockPay's are its own: src/mockpay/server/schema.ts). */
export * from "./merchant";
export * from "./operations";
