/** MockPay's own refusals: what its pages and APIs explain to the caller. */
export type MockPayErrorCode = "NOT_FOUND" | "INVALID_REQUEST" | "LINK_EXPIRED";

export class MockPayError extends Error {
  override readonly name = "MockPayError";
  constructor(
    readonly code: MockPayErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export const isMockPayError = (error: unknown): error is MockPayError => error instanceof MockPayError;
