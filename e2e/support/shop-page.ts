import { expect, type Page, type Request } from "@playwright/test";

export const CREATE_ORDER = "**/api/trpc/orders.create**";

/** The shop as a shopper sees it. */
export class ShopPage {
  readonly createOrderCalls: Request[] = [];

  constructor(readonly page: Page) {
    page.on("request", (request) => {
      if (request.url().includes("orders.create")) this.createOrderCalls.push(request);
    });
  }

  get placeOrderButton() {
    return this.page.getByRole("button", { name: /Place order|Placing order/ });
  }

  async goto() {
    await this.page.goto("/");
    await expect(this.page.getByRole("heading", { name: "Catalogue" })).toBeVisible();
  }

  async add(productName: string, times = 1) {
    const button = this.page.getByRole("button", { name: `Add one ${productName}` });
    for (let i = 0; i < times; i++) await button.click();
  }

  async expectOrderPage(amount: string) {
    await expect(this.page).toHaveURL(/\/orders\/[0-9a-f-]{36}$/);
    await expect(this.page.getByTestId("order-amount")).toHaveText(amount);
    await expect(this.page.getByTestId("order-status")).toHaveText("PENDING_PAYMENT");
  }

  /** The request ids of every createOrder call the page sent. */
  requestIds(): string[] {
    return this.createOrderCalls.map(
      (request) => (request.postDataJSON() as { json: { requestId: string } }).json.requestId,
    );
  }
}
