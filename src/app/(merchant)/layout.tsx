import type { Metadata } from "next";
import Link from "next/link";
import type { ReactNode } from "react";
import { Providers } from "~/client/providers";
import "./globals.css";

export const metadata: Metadata = {
  title: "Exactly-once checkout",
  description: "A checkout where every business effect happens exactly once.",
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <header className="site">
          <Link href="/">
            <h1>Exactly-once checkout</h1>
          </Link>
          <nav aria-label="Site">
            <Link href="/">Shop</Link>
            {/* Staff pages need the admin token: prefetching them for shoppers would only log 401s. */}
            <Link href="/admin" prefetch={false}>
              Operations
            </Link>
            <Link href="/provider/admin" prefetch={false}>
              MockPay console
            </Link>
          </nav>
        </header>
        <main>
          <Providers>{children}</Providers>
        </main>
      </body>
    </html>
  );
}
