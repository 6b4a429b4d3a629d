import type { Metadata } from "next";
import type { ReactNode } from "react";
import "./mockpay.css";

export const metadata: Metadata = {
  title: "MockPay",
  description: "A simulated payment provider: a separate party that talks to the shop over signed HTTP.",
};

/** MockPay's own root layout: a shopper who lands here has left the shop. */
export default function MockPayLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <header className="mockpay">
          <strong>MockPay</strong>
          <span className="small">a simulated payment provider</span>
        </header>
        <main>{children}</main>
      </body>
    </html>
  );
}
