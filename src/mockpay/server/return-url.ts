/**
 * Where MockPay sends the shopper back: a path on this same site, never another origin. A return URL such
 * as `//evil.example/x` starts with "/" and is still another site, so it is parsed as a URL against a
 * placeholder origin and kept only if it stays there; anything else goes back to the shop's front page.
 */
export function sameSiteReturnPath(returnUrl: string): string {
  const base = "http://this-site.invalid";
  try {
    const url = new URL(returnUrl, base);
    if (url.origin !== base || !returnUrl.startsWith("/")) return "/";
    return `${url.pathname}${url.search}${url.hash}`;
  } catch {
    return "/";
  }
}
