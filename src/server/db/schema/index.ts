/** The merchant's tables (MockPay's are its own: src/mockpay/server/schema.ts). */

export * from "./infrastructure";
export * from "./merchant";
